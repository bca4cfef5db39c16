-- Connections: a user's stored credential per integration (sealed like vault values), the
-- pending connections `connect` mints, proxy tokens curl_session mints (for revocation), and
-- custom apps (project-defined integrations).

CREATE TABLE connections (
    id             TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    integration    TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('connected', 'expired', 'revoked')),
    ciphertext     TEXT,
    nonce          TEXT,
    key_version    BIGINT,
    expires_at     BIGINT,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    UNIQUE (project_id, user_id, integration)
);

CREATE TABLE pending_connections (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    integration     TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'connected')),
    oauth_state     TEXT UNIQUE,
    pkce_verifier   TEXT,
    state_expires_at BIGINT,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL
);
CREATE INDEX pending_connections_expires ON pending_connections(expires_at);

CREATE TABLE proxy_tokens (
    jti           TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    integrations  TEXT NOT NULL,
    expires_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    created_at    BIGINT NOT NULL
);
CREATE INDEX proxy_tokens_user ON proxy_tokens(user_id);

CREATE TABLE apps (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (project_id, name)
);
