-- One counter per project, bumped in the same transaction as every change of a vault value, so
-- every instance knows when its copy of the project's scrubbing patterns is stale.
CREATE TABLE vault_generations (
    project_id  TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    generation  BIGINT NOT NULL
);

-- One row per sign-in throttling scope (`acct:<email>`, `ip:<address>`): upserting it locks the
-- scope, so checking the failure count and counting an attempt is one atomic step on both
-- engines (SQLite's write transaction, PostgreSQL's row lock).
CREATE TABLE sign_in_scopes (
    scope       TEXT PRIMARY KEY,
    touched_at  BIGINT NOT NULL
);
