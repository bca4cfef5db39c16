-- schedule.callback (D8): durable, at-least-once HTTP callbacks. A row is claimed by one
-- instance at a time with a lease (FOR UPDATE SKIP LOCKED on PostgreSQL; SQLite's single
-- writer elsewhere); a process that dies mid-delivery leaves a lease that expires, and the
-- callback is delivered again under the same id. The payload is sealed with the vault's master
-- key (it may carry substituted secrets); what people are shown is the agent's template.

CREATE TABLE scheduled_callbacks (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id          TEXT NOT NULL,
    api_key_id       TEXT,
    url              TEXT NOT NULL,
    method           TEXT NOT NULL,
    payload_shown    TEXT,
    ciphertext       TEXT NOT NULL,
    nonce            TEXT NOT NULL,
    key_version      BIGINT NOT NULL,
    scheduled_for    BIGINT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('scheduled', 'delivered', 'failed', 'cancelled')),
    attempts         BIGINT NOT NULL,
    next_attempt_at  BIGINT NOT NULL,
    lease_until      BIGINT,
    response_status  BIGINT,
    error            TEXT,
    delivered_at     BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX scheduled_callbacks_due ON scheduled_callbacks(status, next_attempt_at);
CREATE INDEX scheduled_callbacks_project ON scheduled_callbacks(project_id, created_at);

-- Every delivery attempt and how it went (never the body).
CREATE TABLE callback_attempts (
    id               TEXT PRIMARY KEY,
    callback_id      TEXT NOT NULL REFERENCES scheduled_callbacks(id) ON DELETE CASCADE,
    attempt          BIGINT NOT NULL,
    started_at       BIGINT NOT NULL,
    duration_ms      BIGINT NOT NULL,
    response_status  BIGINT,
    error            TEXT
);
CREATE INDEX callback_attempts_callback ON callback_attempts(callback_id, attempt);

-- Each project's callback signing secret, sealed; made on first use.
CREATE TABLE callback_signing_secrets (
    project_id   TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    ciphertext   TEXT NOT NULL,
    nonce        TEXT NOT NULL,
    key_version  BIGINT NOT NULL,
    created_at   BIGINT NOT NULL
);
