-- People (decision D16): users, their identities at the operator's OpenID Connect providers, memberships
-- in workspaces with a role, invitations, and dashboard sessions. Secrets (invitation tokens, session ids,
-- one-time sign-in links) are stored as SHA-256 only.

CREATE TABLE users (
  id             text PRIMARY KEY,
  email          text NOT NULL,
  email_verified boolean NOT NULL,
  name           text,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL
);
-- One account per e-mail address: linking is by verified address only (D16), so it must be unambiguous.
CREATE UNIQUE INDEX users_email_unique ON users (lower(email));

-- A user's account at one provider: the provider's `sub` is the identity, never the e-mail.
CREATE TABLE user_identities (
  provider   text NOT NULL,
  subject    text NOT NULL,
  user_id    text NOT NULL REFERENCES users (id),
  created_at timestamptz NOT NULL,
  PRIMARY KEY (provider, subject)
);
CREATE INDEX user_identities_by_user ON user_identities (user_id);

CREATE TABLE memberships (
  workspace_id text NOT NULL REFERENCES workspaces (id),
  user_id      text NOT NULL REFERENCES users (id),
  role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX memberships_by_user ON memberships (user_id);

CREATE TABLE invitations (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id),
  email        text NOT NULL,
  role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  token_hash   text NOT NULL UNIQUE,
  status       text NOT NULL CHECK (status IN ('pending', 'accepted', 'revoked')),
  invited_by   text NOT NULL,
  expires_at   timestamptz NOT NULL,
  created_at   timestamptz NOT NULL,
  accepted_by  text REFERENCES users (id),
  accepted_at  timestamptz
);
CREATE INDEX invitations_by_workspace ON invitations (workspace_id, id DESC);

-- Dashboard sessions: the cookie carries the secret, the row its hash. `idle_expires_at` moves with use
-- (at most once a minute), `expires_at` never does; sign-out everywhere revokes every row of the user.
-- `enterprise`: signed in through an enterprise-only provider, so it acts only in enterprise workspaces.
CREATE TABLE sessions (
  id              text PRIMARY KEY,
  secret_hash     text NOT NULL UNIQUE,
  user_id         text NOT NULL REFERENCES users (id),
  provider        text NOT NULL,
  enterprise      boolean NOT NULL,
  created_at      timestamptz NOT NULL,
  last_seen_at    timestamptz NOT NULL,
  idle_expires_at timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL,
  revoked_at      timestamptz
);
CREATE INDEX sessions_by_user ON sessions (user_id) WHERE revoked_at IS NULL;

-- A sign-in under way at a provider: its `state` (hashed; the browser holds it in a cookie too), the PKCE
-- verifier and the nonce. Taken (deleted) by the callback, so a code or state works once.
CREATE TABLE signin_flows (
  state_hash    text PRIMARY KEY,
  provider      text NOT NULL,
  code_verifier text NOT NULL,
  nonce         text NOT NULL,
  -- Where to go after sign-in: a path on this server (the OAuth consent screen that asked for sign-in).
  return_to     text,
  expires_at    timestamptz NOT NULL
);

-- The first-run sign-in link for the bootstrap owner (no provider configured): single use.
CREATE TABLE signin_links (
  token_hash text PRIMARY KEY,
  user_id    text NOT NULL REFERENCES users (id),
  expires_at timestamptz NOT NULL,
  used_at    timestamptz,
  created_at timestamptz NOT NULL
);

-- OAuth 2.0 for third-party apps (D16). Clients are registered per workspace; a public client has no
-- secret (PKCE S256 is then required). Every secret (client secret, code, access and refresh token) is
-- stored as SHA-256 only.
CREATE TABLE oauth_clients (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL REFERENCES workspaces (id),
  name          text NOT NULL,
  secret_hash   text,
  redirect_uris jsonb NOT NULL,
  scopes        jsonb NOT NULL,
  created_by    text NOT NULL,
  created_at    timestamptz NOT NULL,
  revoked_at    timestamptz
);
CREATE INDEX oauth_clients_by_workspace ON oauth_clients (workspace_id, id DESC);

-- What a person consented to: a client acting for them in one workspace with these scopes.
CREATE TABLE oauth_grants (
  id             text PRIMARY KEY,
  client_id      text NOT NULL REFERENCES oauth_clients (id),
  user_id        text NOT NULL REFERENCES users (id),
  workspace_id   text NOT NULL REFERENCES workspaces (id),
  scopes         jsonb NOT NULL,
  created_at     timestamptz NOT NULL,
  revoked_at     timestamptz,
  revoked_reason text
);
CREATE INDEX oauth_grants_by_user ON oauth_grants (user_id, workspace_id) WHERE revoked_at IS NULL;
CREATE INDEX oauth_grants_by_client ON oauth_grants (client_id) WHERE revoked_at IS NULL;

-- Authorization codes: single use, short-lived, bound to the client, the redirect URI and the PKCE challenge.
CREATE TABLE oauth_codes (
  code_hash      text PRIMARY KEY,
  grant_id       text NOT NULL REFERENCES oauth_grants (id),
  redirect_uri   text NOT NULL,
  code_challenge text,
  expires_at     timestamptz NOT NULL,
  used_at        timestamptz
);

-- Access (`svc_oauth_at_`, 1 h) and refresh (`svc_oauth_rt_`, 30 days) tokens. A refresh token is used
-- once (`used_at`): a second use is a reuse and revokes the grant.
CREATE TABLE oauth_tokens (
  token_hash text PRIMARY KEY,
  grant_id   text NOT NULL REFERENCES oauth_grants (id),
  kind       text NOT NULL CHECK (kind IN ('access', 'refresh')),
  expires_at timestamptz NOT NULL,
  used_at    timestamptz,
  created_at timestamptz NOT NULL
);
CREATE INDEX oauth_tokens_by_grant ON oauth_tokens (grant_id);
