-- MCP authorization (OAuth 2.1): workbench as the authorization server of its own /mcp.
-- Clients register dynamically (RFC 7591) or are identified by a client ID metadata document
-- (an https URL, fetched and cached); a person approves a client once (a grant), which yields
-- single-use codes and then access and refresh tokens. Secrets, codes and tokens are stored as
-- SHA-256 digests only.

CREATE TABLE oauth_clients (
    client_id                   TEXT PRIMARY KEY,
    kind                        TEXT NOT NULL CHECK (kind IN ('registered', 'metadata')),
    client_name                 TEXT NOT NULL,
    -- A JSON array of exact redirect URIs.
    redirect_uris               TEXT NOT NULL,
    token_endpoint_auth_method  TEXT NOT NULL CHECK (token_endpoint_auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    client_secret_hash          TEXT,
    client_uri                  TEXT,
    registered_from             TEXT,
    created_at                  BIGINT NOT NULL,
    -- Metadata documents: when the document was last fetched.
    fetched_at                  BIGINT
);
CREATE INDEX oauth_clients_registered_from ON oauth_clients(registered_from, created_at);

CREATE TABLE oauth_grants (
    id            TEXT PRIMARY KEY,
    client_id     TEXT NOT NULL REFERENCES oauth_clients(client_id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    -- The policy the client's tokens act under; NULL: the project's default policy.
    policy_id     TEXT,
    resource      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);
CREATE INDEX oauth_grants_user ON oauth_grants(user_id, created_at);

CREATE TABLE oauth_codes (
    code_hash       TEXT PRIMARY KEY,
    grant_id        TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    redirect_uri    TEXT NOT NULL,
    code_challenge  TEXT NOT NULL,
    resource        TEXT NOT NULL,
    expires_at      BIGINT NOT NULL,
    used_at         BIGINT
);

CREATE TABLE oauth_tokens (
    token_hash  TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    grant_id    TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    -- Every token descending from one code shares a family; a reused refresh token revokes it.
    family_id   TEXT NOT NULL,
    resource    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX oauth_tokens_family ON oauth_tokens(family_id);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
