-- Governance. Tool allowlist policies (seed 004 "The tool allowlist", D14, D20), attached to API keys; at
-- most one per project is the default, which keys without a policy get. `policy_generation`
-- changes with every policy change of the project, so every instance knows when its cached
-- policies are stale (it is read with the API key, at no extra query).

CREATE TABLE policies (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    tool_allowlist  TEXT NOT NULL,
    is_default      INTEGER NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (project_id, name)
);
CREATE UNIQUE INDEX policies_one_default ON policies(project_id) WHERE is_default = 1;

ALTER TABLE api_keys ADD COLUMN policy_id TEXT REFERENCES policies(id);
ALTER TABLE projects ADD COLUMN policy_generation BIGINT NOT NULL DEFAULT 0;

-- Calls held for a person's confirmation (D15). `arguments` is the agent's template as sent
-- (vault references stay references; values are resolved only when the call runs);
-- `fingerprint` identifies the identical call (same key, tool and template), whose repeats
-- before `expires_at` get this row's outcome instead of a second confirmation.
CREATE TABLE confirmations (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    tool_call_id  TEXT NOT NULL,
    tool          TEXT NOT NULL,
    arguments     TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    api_key_id    TEXT,
    user_id       TEXT NOT NULL,
    end_user_id   TEXT,
    surface       TEXT NOT NULL,
    timeout_ms    BIGINT NOT NULL,
    policy_id     TEXT,
    status        TEXT NOT NULL,
    reason        TEXT,
    decided_by    TEXT,
    decided_at    BIGINT,
    outcome       TEXT,
    expires_at    BIGINT NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX confirmations_fingerprint ON confirmations(project_id, fingerprint, created_at);
-- One pending confirmation per identical call, whichever instance holds it (D15).
CREATE UNIQUE INDEX confirmations_one_pending ON confirmations(project_id, fingerprint) WHERE status = 'pending';
CREATE INDEX confirmations_status ON confirmations(project_id, status, created_at);

-- Finishing a call's audit row (and a call's audit detail) looks it up by tool call: without
-- this index every finish scanned the project's whole log.
CREATE INDEX audit_events_tool_call ON audit_events(tool_call_id);

-- Per-key rate limits (calls per minute, none by default), counted in one-minute windows shared
-- by every instance on the database.
ALTER TABLE api_keys ADD COLUMN rate_limit_per_minute BIGINT;
CREATE TABLE rate_windows (
    api_key_id    TEXT NOT NULL,
    window_start  BIGINT NOT NULL,
    count         BIGINT NOT NULL,
    PRIMARY KEY (api_key_id, window_start)
);
CREATE INDEX rate_windows_start ON rate_windows(window_start);
