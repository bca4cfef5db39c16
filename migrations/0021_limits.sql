-- Rate limits and quotas in policies (issue 34): a policy's limits as JSON, and one table of
-- counting windows for every limit (a key's own per-minute limit and each policy limit's
-- bucket: per key, user or project), shared by every instance on the database. A window now
-- says when it ends, so day and month windows outlive the two minutes minute windows are kept.
ALTER TABLE policies ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE rate_windows RENAME TO limit_windows;
ALTER TABLE limit_windows RENAME COLUMN api_key_id TO bucket;
ALTER TABLE limit_windows ADD COLUMN window_end BIGINT NOT NULL DEFAULT 0;
CREATE INDEX limit_windows_end ON limit_windows(window_end);
