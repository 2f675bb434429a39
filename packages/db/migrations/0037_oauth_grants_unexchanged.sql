-- The sweep of abandoned OAuth consents (OAuthService.purgeAbandonedGrants) read every grant older than an hour, and
-- probed each one's tokens and codes, on every run (every 30 s by default): linear in the grants ever made, though
-- only a grant that never got a token can be abandoned (an exchanged grant keeps its newest token for good: the
-- refresh deletes expired tokens just after inserting two new ones, and the expired-token sweep only tokens older than
-- another of the same grant). `exchanged_at` is set
-- when a grant's code is exchanged for tokens, and the sweep reads its candidates from the index of the grants
-- without it. No backfill here: an UPDATE of every grant would hold this table's lock (taken by ALTER TABLE, for the
-- whole migration) while instances of the previous release still serve OAuth. The sweep marks the grants exchanged
-- before this migration, a batch a run, as it comes to them.
ALTER TABLE oauth_grants ADD COLUMN exchanged_at timestamptz;
CREATE INDEX oauth_grants_unexchanged ON oauth_grants (created_at) WHERE exchanged_at IS NULL;
