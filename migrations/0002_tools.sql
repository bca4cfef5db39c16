-- Tool execution records: one tool_calls row per execution (what REST /v1/tools/calls/{id}
-- returns), one audit_events row per execution attempt whatever its outcome, and daily usage
-- counters per project, API key, tool and meter.

CREATE TABLE tool_calls (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL,
    api_key_id    TEXT,
    tool          TEXT NOT NULL,
    status        TEXT NOT NULL,
    arguments     TEXT NOT NULL,
    result        TEXT,
    error         TEXT,
    duration_ms   BIGINT NOT NULL,
    end_user_id   TEXT,
    surface       TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX tool_calls_project ON tool_calls(project_id, created_at);

CREATE TABLE audit_events (
    id            TEXT PRIMARY KEY,
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id       TEXT,
    api_key_id    TEXT,
    action        TEXT NOT NULL,
    tool          TEXT,
    tool_call_id  TEXT,
    status        TEXT NOT NULL,
    error_code    TEXT,
    duration_ms   BIGINT,
    end_user_id   TEXT,
    surface       TEXT NOT NULL,
    detail        TEXT,
    created_at    BIGINT NOT NULL
);
CREATE INDEX audit_events_project ON audit_events(project_id, created_at);
CREATE INDEX audit_events_project_tool ON audit_events(project_id, tool, created_at);

CREATE TABLE usage_counters (
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    api_key_id  TEXT NOT NULL,
    tool        TEXT NOT NULL,
    day         TEXT NOT NULL,
    meter       TEXT NOT NULL,
    value       BIGINT NOT NULL,
    PRIMARY KEY (project_id, api_key_id, tool, day, meter)
);

-- Hosts http.fetch may reach, per project (exact host or "*.suffix", optional ":port").
CREATE TABLE egress_rules (
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    pattern     TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, pattern)
);

-- Metadata of objects in project storage (the bytes live in the object store).
CREATE TABLE storage_objects (
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    object_key    TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    size          BIGINT NOT NULL,
    sha256        TEXT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (project_id, object_key)
);
