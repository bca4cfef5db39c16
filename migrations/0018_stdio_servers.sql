-- Local MCP servers over stdio (issue 32): how to start one (program, arguments, environment
-- with vault references, working directory, limits), as JSON; NULL for remote servers. Such a
-- server's `transport` is 'stdio' and its `url` is 'stdio:' (it has none).
ALTER TABLE mcp_servers ADD COLUMN launch TEXT;
