-- The sweep of expired OAuth tokens (OAuthService.purgeExpiredTokens) read every token, joined to its grant, on every
-- run (every 30 s by default), to find those expired over a day ago. An app refreshing hourly holds about 750 (the
-- used refresh tokens are kept until they expire, 30 days, for reuse detection): the read was linear in the tokens
-- held, most of them live. It now takes its candidates from this index, below the cut, and deletes every one it reads
-- but those of a grant not marked exchanged yet (migration 0037; the sweep of abandoned consents marks those holding
-- a token). The index holds the spent tokens only: access tokens, and refresh tokens used (rotated). Each grant's
-- current refresh token is never a candidate: it is kept, expired or not, so that an app revoking it (RFC 7009) ends
-- its grant however long ago it stopped. The entries of deleted tokens are read until a vacuum removes them (by a
-- bitmap scan on every run; a plain index scan marks them dead once).
CREATE INDEX oauth_tokens_spent_by_expiry ON oauth_tokens (expires_at) WHERE kind = 'access' OR used_at IS NOT NULL;
