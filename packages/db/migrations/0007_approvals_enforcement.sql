-- Approvals and enforcement (decision D7).

-- An approval request: bound to SHA-256(JCS({agentId, action, context})), decided once, used by the guard once.
-- A pending approval past expires_at reads as expired at once; the sweep records it.
CREATE TABLE approvals (
  id              text PRIMARY KEY,
  workspace_id    text NOT NULL REFERENCES workspaces (id),
  agent_id        text NOT NULL REFERENCES agents (id),
  action          text NOT NULL,
  context         jsonb NOT NULL,
  binding_hash    text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  reason          text,
  policy_id       text,
  rule_id         text,
  approvers       jsonb NOT NULL DEFAULT '[]',
  decided_by      text,
  decision_reason text,
  decided_at      timestamptz,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz,
  created_at      timestamptz NOT NULL,
  CONSTRAINT approvals_used_only_approved CHECK (used_at IS NULL OR status = 'approved')
);
CREATE INDEX approvals_by_workspace ON approvals (workspace_id, status, id DESC);
CREATE INDEX approvals_by_agent ON approvals (workspace_id, agent_id, id DESC);
CREATE INDEX approvals_pending_expiry ON approvals (expires_at) WHERE status = 'pending';

-- An enforcement against an agent. In force: active, appealed, or resolved as upheld, until expires_at.
-- One in force of type suspension or revocation keeps the agent suspended.
CREATE TABLE enforcements (
  id               text PRIMARY KEY,
  workspace_id     text NOT NULL REFERENCES workspaces (id),
  agent_id         text NOT NULL REFERENCES agents (id),
  type             text NOT NULL CHECK (type IN ('warning', 'throttle', 'suspension', 'revocation')),
  status           text NOT NULL CHECK (status IN ('active', 'appealed', 'resolved', 'expired')),
  reason           text NOT NULL,
  policy_id        text,
  rule_id          text,
  limit_per_minute integer CHECK (limit_per_minute > 0),
  expires_at       timestamptz,
  appeal_reason    text,
  appealed_at      timestamptz,
  resolution       text CHECK (resolution IN ('upheld', 'overturned')),
  resolution_note  text,
  resolved_at      timestamptz,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  CONSTRAINT enforcements_throttle_limit CHECK ((type = 'throttle') = (limit_per_minute IS NOT NULL)),
  CONSTRAINT enforcements_resolution CHECK ((resolution IS NULL) = (resolved_at IS NULL))
);
CREATE INDEX enforcements_by_workspace ON enforcements (workspace_id, id DESC);
CREATE INDEX enforcements_by_agent ON enforcements (workspace_id, agent_id, id DESC);
CREATE INDEX enforcements_expiring ON enforcements (expires_at)
  WHERE expires_at IS NOT NULL AND status IN ('active', 'appealed', 'resolved');
