-- Accounts: projects (tenants), users, memberships, API keys, portal sessions and sign-in throttling.
-- Portable SQL: runs unchanged on SQLite and PostgreSQL (TEXT ids, BIGINT unix-millisecond times,
-- INTEGER 0/1 flags).

CREATE TABLE projects (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    email          TEXT NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    created_at     BIGINT NOT NULL
);

CREATE TABLE memberships (
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, user_id)
);
CREATE INDEX memberships_user ON memberships(user_id);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    key_prefix    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);
CREATE INDEX api_keys_project ON api_keys(project_id, created_at);

CREATE TABLE portal_sessions (
    id          TEXT PRIMARY KEY,
    data        TEXT NOT NULL,
    user_id     TEXT,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX portal_sessions_expires ON portal_sessions(expires_at);
CREATE INDEX portal_sessions_user ON portal_sessions(user_id);

CREATE TABLE sign_in_failures (
    scope  TEXT NOT NULL,
    at     BIGINT NOT NULL
);
CREATE INDEX sign_in_failures_scope_at ON sign_in_failures(scope, at);

-- One row once the first admin exists; its primary key makes "first" race-free on both engines.
CREATE TABLE instance_setup (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    set_up_at  BIGINT NOT NULL
);
