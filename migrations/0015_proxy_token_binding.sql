-- Proxy tokens are bound to the API key or MCP OAuth grant that minted them (D21): every /c
-- request rebuilds the caller from that key or grant, so revoking it ends its tokens at once and
-- its policy is checked again. Tokens minted before this migration carry neither and are refused.
ALTER TABLE proxy_tokens ADD COLUMN api_key_id TEXT;
ALTER TABLE proxy_tokens ADD COLUMN oauth_grant_id TEXT;

-- A call held for an MCP OAuth client remembers the grant it came through, so its approval runs
-- it under that grant's policy (not as the bare user) and a revoked grant's call does not run.
ALTER TABLE confirmations ADD COLUMN oauth_grant_id TEXT;

-- MCP OAuth grants are rate-limited like API keys: an admin may set calls per minute when
-- approving a client (NULL: no limit), counted in the same one-minute windows.
ALTER TABLE oauth_grants ADD COLUMN rate_limit_per_minute BIGINT;
