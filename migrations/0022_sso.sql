-- Single sign-on (issue 34): OpenID Connect providers of a project (settings as validated JSON;
-- the client secret only by reference), the identities people signed in with (issuer subject
-- to user, when last checked, the sealed refresh token of the background re-check), the policy a person's groups cap them with and the provider that gave the
-- membership, and break-glass accounts that keep password sign-in when it is turned off.
CREATE TABLE sso_providers (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    slug        TEXT NOT NULL UNIQUE,
    config      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX sso_providers_project ON sso_providers(project_id);

CREATE TABLE sso_identities (
    provider_id          TEXT NOT NULL REFERENCES sso_providers(id) ON DELETE CASCADE,
    subject              TEXT NOT NULL,
    user_id              TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at           BIGINT NOT NULL,
    signed_in_at         BIGINT NOT NULL,
    -- The last sign-in or background re-check, and when the next re-check is due.
    checked_at           BIGINT NOT NULL,
    next_check_at        BIGINT NOT NULL,
    -- The provider's refresh token (offline_access), sealed with the vault's master keys.
    refresh_ciphertext   TEXT,
    refresh_nonce        TEXT,
    refresh_key_version  BIGINT,
    PRIMARY KEY (provider_id, subject)
);
CREATE INDEX sso_identities_due ON sso_identities(next_check_at);
CREATE INDEX sso_identities_user ON sso_identities(user_id);

ALTER TABLE memberships ADD COLUMN policy_id TEXT;
ALTER TABLE memberships ADD COLUMN sso_provider_id TEXT;
ALTER TABLE users ADD COLUMN break_glass INTEGER NOT NULL DEFAULT 0;
