-- Upstream MCP servers a project admin registered (seed 004, D16), and the tools each offers.
-- Credentials are never stored here: `auth` names a vault secret (`secret_ref`).

CREATE TABLE mcp_servers (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    transport        TEXT NOT NULL,
    url              TEXT NOT NULL,
    auth             TEXT NOT NULL,
    tool_prefix      TEXT NOT NULL,
    timeout_ms       BIGINT NOT NULL,
    max_concurrency  BIGINT NOT NULL,
    auto_approve     INTEGER NOT NULL,
    last_refresh_at  BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (project_id, name)
);

-- `fingerprint` is a hash of the tool's description and schemas as the upstream last said;
-- `approved_fingerprint` what an admin last approved (the rug-pull guard compares the two).
CREATE TABLE mcp_server_tools (
    server_id             TEXT NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    name                  TEXT NOT NULL,
    description           TEXT NOT NULL,
    input_schema          TEXT NOT NULL,
    output_schema         TEXT,
    annotations           TEXT,
    side_effects_override TEXT,
    status                TEXT NOT NULL,
    fingerprint           TEXT NOT NULL,
    approved_fingerprint  TEXT,
    approved_description  TEXT,
    approved_input_schema TEXT,
    updated_at            BIGINT NOT NULL,
    PRIMARY KEY (server_id, name)
);
