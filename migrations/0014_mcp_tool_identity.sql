-- Stable tool identity across refresh (issue 27).
--
-- `mcp_tool_names` records which server owns each upstream tool name of a project (the catalog
-- name, `<tool_prefix><tool>`): the server whose tool exposed the name first keeps it, whatever
-- the servers are called and in whatever order they are read, across refreshes, restarts and
-- instances, until that server is deleted. Another server's tool that would take the name is
-- held for review. Names exposed before this migration are claimed on each project's first
-- reload, in the order the servers were registered.
CREATE TABLE mcp_tool_names (
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    server_id   TEXT NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    claimed_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);
CREATE INDEX mcp_tool_names_server ON mcp_tool_names(server_id);

-- A tool's annotation hints (readOnlyHint, destructiveHint, idempotentHint, openWorldHint) join
-- its review fingerprint, and the review shows what was approved of them. A tool approved as it
-- was last seen was approved with the annotations last seen; stored fingerprints move to the new
-- format on each tool's first refresh (see core/src/upstream/README.md).
ALTER TABLE mcp_server_tools ADD COLUMN approved_annotations TEXT;
UPDATE mcp_server_tools SET approved_annotations = annotations WHERE approved_fingerprint = fingerprint;
