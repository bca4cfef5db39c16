-- One counter per project, bumped in the same transaction as every change of a vault value, so
-- every instance knows when its copy of the project's scrubbing patterns is stale.

CREATE TABLE vault_generations (
    project_id  TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    generation  BIGINT NOT NULL
);
