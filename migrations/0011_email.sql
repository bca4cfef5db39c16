-- email.send (D8): a project sends only from sender domains it has proven it controls, by
-- publishing a TXT record at _workbench.<domain> holding a random token; and at most so many
-- messages an hour, counted from one row per message sent.

CREATE TABLE email_domains (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    domain           TEXT NOT NULL,
    token            TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'verified')),
    created_at       BIGINT NOT NULL,
    verified_at      BIGINT,
    last_checked_at  BIGINT,
    last_error       TEXT,
    UNIQUE (project_id, domain)
);

-- One row per message accepted for sending (a reservation made before the SMTP conversation,
-- removed again when the server refuses the message), for the hourly limit and the portal.
CREATE TABLE email_sends (
    id           TEXT PRIMARY KEY,
    project_id   TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    domain       TEXT NOT NULL,
    recipients   BIGINT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX email_sends_project ON email_sends(project_id, created_at);

-- A project's own hourly limit, below the operator's (none: the operator's).
ALTER TABLE project_settings ADD COLUMN email_hourly_limit BIGINT;
