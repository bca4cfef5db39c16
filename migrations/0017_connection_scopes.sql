-- Step-up authorization (issue 31): when an upstream MCP server answers a user's call with
-- 403 insufficient_scope, the scopes it asks for are remembered on that user's connection, so
-- their next connect asks the authorization server for them as well as the configured ones.
-- Space-separated scope tokens; NULL: none beyond the integration's own.
ALTER TABLE connections ADD COLUMN wanted_scopes TEXT;
