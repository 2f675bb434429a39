-- The scope of each OAuth token (RFC 6749 section 6): a refresh may ask for less than it was granted, and the
-- access token it returns then acts with that much only; the new refresh token keeps the old one's scope. NULL
-- (tokens issued before this migration): the grant's scopes, as they acted until now.
ALTER TABLE oauth_tokens ADD COLUMN scopes jsonb;
