-- The codes of a grant. Without this index, deleting a grant (the sweep of abandoned consents, up to a batch at a
-- time) had PostgreSQL's foreign-key check scan every code of every grant once per grant deleted: 104,100 code rows
-- read to delete 50 grants among 2,050 (test/oauth/purge-plans.test.ts; a review measured 6 s for 2,000 grants
-- among 52,000 codes). It also serves the sweep's own "has an unexpired code" test and the delete of the codes.
CREATE INDEX oauth_codes_by_grant ON oauth_codes (grant_id);
