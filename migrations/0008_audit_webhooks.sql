-- Audit detail, audit retention and the confirmation webhook (seed 004 "Metering", D15, D17).

-- A call's detail shows how big its result was and the Idempotency-Key it came with.
ALTER TABLE tool_calls ADD COLUMN result_bytes BIGINT;
ALTER TABLE tool_calls ADD COLUMN idempotency_key TEXT;

-- Project settings an admin changes: how many days audit rows are kept (NULL: forever), and the
-- webhook called when a call is held for confirmation. The webhook's signing secret is a vault
-- reference (by name), never a value.
CREATE TABLE project_settings (
    project_id                 TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    audit_retention_days       BIGINT,
    webhook_url                TEXT,
    webhook_secret_ref         TEXT,
    updated_at                 BIGINT NOT NULL
);

-- Each webhook delivery and how it went, so admins can see that approvers were told.
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    event            TEXT NOT NULL,
    subject_id       TEXT NOT NULL,
    url              TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         BIGINT NOT NULL,
    response_status  BIGINT,
    error            TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_project ON webhook_deliveries(project_id, created_at);

-- Retention keeps calls a live confirmation still holds; it finds them by tool call.
CREATE INDEX confirmations_tool_call ON confirmations(tool_call_id);

-- Bumped with every change that adds a credential of a user in a project (connecting, a
-- refresh), in the same transaction. It is read with the API key, so every instance knows when
-- its cached copy of the caller's credentials (for scrubbing) is stale, at no extra query.
ALTER TABLE memberships ADD COLUMN credentials_generation BIGINT NOT NULL DEFAULT 0;
