-- One outbound delivery service (D25, issue 28): the confirmation webhook and scheduled
-- callbacks become rows of one leased outbox, `deliveries`, with one history of attempts,
-- `delivery_attempts`. A pending delivery is a row any instance may claim under a lease
-- (FOR UPDATE SKIP LOCKED on PostgreSQL, SQLite's single writer elsewhere); a process that
-- stops leaves a row whose lease runs out, and it is delivered after a restart.
--
-- What is sent (the URL and payload after substitution) is sealed with the vault's master key,
-- as callbacks were; `url` is what people are shown. `secret_ref` names the vault secret a
-- webhook is signed with; NULL means the project's signing secret (callbacks).
CREATE TABLE deliveries (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('webhook', 'callback')),
    event            TEXT NOT NULL,
    subject_id       TEXT NOT NULL,
    url              TEXT NOT NULL,
    method           TEXT NOT NULL,
    secret_ref       TEXT,
    ciphertext       TEXT,
    nonce            TEXT,
    key_version      BIGINT,
    due_at           BIGINT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivering', 'delivered', 'failed', 'cancelled')),
    attempts         BIGINT NOT NULL,
    next_attempt_at  BIGINT NOT NULL,
    lease_until      BIGINT,
    response_status  BIGINT,
    error            TEXT,
    delivered_at     BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX deliveries_due ON deliveries(status, next_attempt_at);
CREATE INDEX deliveries_project ON deliveries(project_id, kind, created_at);

-- Every attempt of every delivery and how it went (never the body or a secret).
CREATE TABLE delivery_attempts (
    id               TEXT PRIMARY KEY,
    delivery_id      TEXT NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
    attempt          BIGINT NOT NULL,
    started_at       BIGINT NOT NULL,
    duration_ms      BIGINT NOT NULL,
    response_status  BIGINT,
    error            TEXT
);
CREATE INDEX delivery_attempts_delivery ON delivery_attempts(delivery_id, attempt);

-- Webhook deliveries so far. Their bodies were never stored, so one still waiting for an
-- in-process retry (lost when that process stopped) cannot be resumed: it is recorded failed.
INSERT INTO deliveries (id, project_id, kind, event, subject_id, url, method, secret_ref,
                        ciphertext, nonce, key_version, due_at, status, attempts, next_attempt_at,
                        lease_until, response_status, error, delivered_at, created_at, updated_at)
SELECT id, project_id, 'webhook', event, subject_id, url, 'POST', NULL,
       NULL, NULL, NULL, created_at,
       CASE WHEN status = 'delivered' THEN 'delivered' ELSE 'failed' END,
       attempts, created_at, NULL, response_status,
       CASE WHEN status IN ('delivered', 'failed') THEN error
            ELSE COALESCE(error || '; ', '') || 'not retried: workbench stopped before the retry (deliveries made before the outbox were not resumed)' END,
       CASE WHEN status = 'delivered' THEN updated_at ELSE NULL END,
       created_at, updated_at
FROM webhook_deliveries;

-- Their last attempt is all that was kept of them.
INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, response_status, error)
SELECT 'dla_' || id, id, attempts, updated_at, 0, response_status, error
FROM webhook_deliveries WHERE attempts > 0;

-- Scheduled callbacks keep their id, sealed target (sealed under `callback:<id>`), state and
-- lease; one claimed by a process that stopped is reclaimed when its lease runs out.
INSERT INTO deliveries (id, project_id, kind, event, subject_id, url, method, secret_ref,
                        ciphertext, nonce, key_version, due_at, status, attempts, next_attempt_at,
                        lease_until, response_status, error, delivered_at, created_at, updated_at)
SELECT id, project_id, 'callback', 'callback', id, url, method, NULL,
       ciphertext, nonce, key_version, scheduled_for,
       CASE WHEN status <> 'scheduled' THEN status
            WHEN lease_until IS NULL THEN 'pending'
            ELSE 'delivering' END,
       attempts, next_attempt_at, lease_until, response_status, error, delivered_at,
       created_at, updated_at
FROM scheduled_callbacks;

INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, duration_ms, response_status, error)
SELECT id, callback_id, attempt, started_at, duration_ms, response_status, error
FROM callback_attempts;

-- What is particular to a callback (who asked, the agent's templates, when it is due); its
-- delivery is the `deliveries` row with the same id, and goes with it.
CREATE TABLE callbacks (
    id               TEXT PRIMARY KEY REFERENCES deliveries(id) ON DELETE CASCADE,
    project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id          TEXT NOT NULL,
    api_key_id       TEXT,
    url              TEXT NOT NULL,
    method           TEXT NOT NULL,
    payload_shown    TEXT,
    scheduled_for    BIGINT NOT NULL,
    created_at       BIGINT NOT NULL
);
CREATE INDEX callbacks_project ON callbacks(project_id, created_at);

INSERT INTO callbacks (id, project_id, user_id, api_key_id, url, method, payload_shown, scheduled_for, created_at)
SELECT id, project_id, user_id, api_key_id, url, method, payload_shown, scheduled_for, created_at
FROM scheduled_callbacks;

DROP TABLE callback_attempts;
DROP TABLE scheduled_callbacks;
DROP TABLE webhook_deliveries;
