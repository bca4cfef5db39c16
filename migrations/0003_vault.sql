-- The vault: project secrets sealed with the versioned master key (XChaCha20-Poly1305; the
-- associated data binds key version, project and name). And Idempotency-Key records (D13).

CREATE TABLE vault_secrets (
    id           TEXT PRIMARY KEY,
    project_id   TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    ciphertext   TEXT NOT NULL,
    nonce        TEXT NOT NULL,
    key_version  BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    UNIQUE (project_id, name)
);

CREATE TABLE idempotency_keys (
    api_key_id       TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    request_hash     TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
    response_status  BIGINT,
    response_body    TEXT,
    created_at       BIGINT NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
