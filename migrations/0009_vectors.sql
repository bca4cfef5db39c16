-- vector.upsert / vector.query (D8): project-scoped namespaces of embedding vectors. A
-- namespace's dimension is fixed by its first upsert; its generation is bumped by every change,
-- so each instance knows when its in-memory copy is stale.

CREATE TABLE vector_namespaces (
    project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    dimension     BIGINT NOT NULL,
    generation    BIGINT NOT NULL,
    vector_count  BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

-- One vector: its values as little-endian float32, base64 (portable across both engines), and
-- its metadata as JSON text.
CREATE TABLE vectors (
    project_id  TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    id          TEXT NOT NULL,
    vals        TEXT NOT NULL,
    metadata    TEXT,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, namespace, id),
    FOREIGN KEY (project_id, namespace) REFERENCES vector_namespaces(project_id, name) ON DELETE CASCADE
);
