-- Prompts, resources and resource templates of upstream MCP servers (issue 33), reviewed like
-- their tools (0006, 0014): what the upstream last listed (`body`, scrubbed JSON), what an
-- admin last approved, and the item's status. `item_key` is the prompt's name, the resource's
-- URI or the template's URI template, as the upstream gives it.
CREATE TABLE mcp_server_items (
    server_id            TEXT NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    kind                 TEXT NOT NULL,
    item_key             TEXT NOT NULL,
    body                 TEXT NOT NULL,
    status               TEXT NOT NULL,
    fingerprint          TEXT NOT NULL,
    approved_fingerprint TEXT,
    approved_body        TEXT,
    updated_at           BIGINT NOT NULL,
    PRIMARY KEY (server_id, kind, item_key)
);

-- A set publishes the prompts and resources of its tools' MCP servers only when asked:
-- existing sets publish nothing new.
ALTER TABLE tool_sets ADD COLUMN upstream_items INTEGER NOT NULL DEFAULT 0;
