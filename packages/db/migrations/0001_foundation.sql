-- Foundation: workspaces, agents and their versions, API keys, the audit chain, idempotency.
-- Every row that belongs to a workspace carries workspace_id; queries filter on it first.

CREATE TABLE workspaces (
  id            text PRIMARY KEY,
  name          text NOT NULL,
  environment   text NOT NULL CHECK (environment IN ('live', 'test')),
  plan          text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro', 'enterprise')),
  guard_default text NOT NULL DEFAULT 'allow' CHECK (guard_default IN ('allow', 'deny')),
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  deleted_at    timestamptz
);
CREATE INDEX workspaces_live ON workspaces (id DESC) WHERE deleted_at IS NULL;

CREATE TABLE agents (
  id              text PRIMARY KEY,
  workspace_id    text NOT NULL REFERENCES workspaces (id),
  name            text NOT NULL,
  description     text,
  labels          jsonb NOT NULL DEFAULT '[]',
  metadata        jsonb NOT NULL DEFAULT '{}',
  status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'deregistered')),
  current_version text,
  trust_score     integer NOT NULL,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL,
  deregistered_at timestamptz
);
-- A name identifies an agent among the registered ones; a deregistered agent frees its name.
CREATE UNIQUE INDEX agents_name_unique ON agents (workspace_id, name) WHERE status <> 'deregistered';
CREATE INDEX agents_by_workspace ON agents (workspace_id, id DESC);

CREATE TABLE agent_versions (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id),
  agent_id     text NOT NULL REFERENCES agents (id),
  version      text NOT NULL,
  description  text,
  metadata     jsonb NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL,
  CONSTRAINT agent_versions_unique UNIQUE (agent_id, version)
);
CREATE INDEX agent_versions_by_agent ON agent_versions (workspace_id, agent_id, id DESC);

CREATE TABLE api_keys (
  id             text PRIMARY KEY,
  workspace_id   text NOT NULL REFERENCES workspaces (id),
  name           text NOT NULL,
  type           text NOT NULL CHECK (type IN ('workspace', 'agent')),
  agent_id       text REFERENCES agents (id),
  environment    text NOT NULL CHECK (environment IN ('live', 'test')),
  scopes         jsonb NOT NULL,
  prefix         text NOT NULL,
  key_hash       text NOT NULL,
  status         text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  expires_at     timestamptz,
  revoked_at     timestamptz,
  revoked_reason text,
  rotated_to     text,
  last_used_at   timestamptz,
  created_at     timestamptz NOT NULL,
  CONSTRAINT api_keys_hash_unique UNIQUE (key_hash),
  CONSTRAINT api_keys_agent_binding CHECK ((type = 'agent') = (agent_id IS NOT NULL))
);
CREATE INDEX api_keys_by_workspace ON api_keys (workspace_id, id DESC);
CREATE INDEX api_keys_expiring ON api_keys (expires_at) WHERE status = 'active' AND expires_at IS NOT NULL;

-- The audit chain: one linear chain per workspace, appended under the chain head's row lock.
CREATE TABLE chain_heads (
  workspace_id text PRIMARY KEY REFERENCES workspaces (id),
  sequence     bigint NOT NULL,
  hash         text NOT NULL
);

CREATE TABLE events (
  workspace_id text NOT NULL,
  sequence     bigint NOT NULL,
  id           text NOT NULL,
  type         text NOT NULL,
  agent_id     text,
  actor_type   text NOT NULL,
  actor_id     text,
  data         jsonb NOT NULL,
  ts           timestamptz NOT NULL,
  prev_hash    text NOT NULL,
  hash         text NOT NULL,
  PRIMARY KEY (workspace_id, sequence),
  CONSTRAINT events_id_unique UNIQUE (id)
);
CREATE INDEX events_by_type ON events (workspace_id, type, sequence DESC);
CREATE INDEX events_by_agent ON events (workspace_id, agent_id, sequence DESC) WHERE agent_id IS NOT NULL;

-- Idempotency-Key records (Stripe semantics): written in the transaction of the request they replay.
CREATE TABLE idempotency_keys (
  workspace_id  text NOT NULL,
  key           text NOT NULL,
  operation     text NOT NULL,
  request_hash  text NOT NULL,
  status_code   integer NOT NULL,
  response_body text NOT NULL,
  created_at    timestamptz NOT NULL,
  PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);
