-- Overrides on upstream tools (issue 33): an admin's project-wide name (after the server's
-- prefix) and description for a tool of an MCP server. The upstream's own text stays in
-- `description`, which the review fingerprint covers; agents, search and schemas see the
-- override. NULL: the upstream's.
ALTER TABLE mcp_server_tools ADD COLUMN name_override TEXT;
ALTER TABLE mcp_server_tools ADD COLUMN description_override TEXT;
