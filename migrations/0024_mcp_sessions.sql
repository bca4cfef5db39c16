-- Where each MCP session lives (issue 33): sessions are held in the memory of the instance
-- that opened them (clients that can be asked things: elicitation, sampling), so another
-- instance that gets one of its requests forwards it there. `instance_url` is that instance's
-- advertised address (`--advertise-url`), never anything a client sent.
CREATE TABLE mcp_sessions (
    id           TEXT PRIMARY KEY,
    instance_url TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX mcp_sessions_created ON mcp_sessions (created_at);
