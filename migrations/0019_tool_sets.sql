-- Tool sets (issue 33): a named, curated set of a project's tools published at its own MCP
-- endpoint, `/mcp/sets/{slug}`, whose `tools/list` lists those tools directly under the names
-- and descriptions chosen for the job. `tools` is the JSON list of entries: the catalog tool,
-- the exposed name, an optional description and fixed argument values.
CREATE TABLE tool_sets (
    id           TEXT PRIMARY KEY,
    project_id   TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    slug         TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    tools        TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX tool_sets_slug ON tool_sets(project_id, slug);

-- An API key may be limited to chosen tool sets (a JSON list of slugs): then it can list and
-- call those sets' tools at their endpoints and nothing else. NULL: not limited.
ALTER TABLE api_keys ADD COLUMN tool_sets TEXT;

-- The set a call came through, on its audit row (NULL: not through a set).
ALTER TABLE audit_events ADD COLUMN tool_set TEXT;
