-- Webhooks (issue 6): endpoints, their deliveries (one per event and endpoint), and every attempt.

-- An endpoint. The signing secret must be usable for HMAC, so it is stored sealed (AES-256-GCM with
-- the master key, the webhook id as associated data), never hashed. `events` holds the filters as
-- registered; match_* hold them compiled for the append statement (aliases resolved, `p.*` → `p.`).
CREATE TABLE webhooks (
  id                         text PRIMARY KEY,
  workspace_id               text NOT NULL REFERENCES workspaces (id),
  url                        text NOT NULL,
  events                     jsonb NOT NULL,
  match_all                  boolean NOT NULL,
  match_types                jsonb NOT NULL,
  match_prefixes             jsonb NOT NULL,
  description                text,
  retry_policy               text NOT NULL CHECK (retry_policy IN ('exponential', 'extended')),
  enabled                    boolean NOT NULL,
  disabled_reason            text CHECK (disabled_reason IN ('disabled_by_user', 'all_attempts_failed', 'endpoint_gone')),
  disabled_at                timestamptz,
  secret                     text NOT NULL,
  secret_hint                text NOT NULL,
  previous_secret            text,
  previous_secret_expires_at timestamptz,
  created_at                 timestamptz NOT NULL,
  updated_at                 timestamptz NOT NULL
);
CREATE INDEX webhooks_by_workspace ON webhooks (workspace_id, id DESC);
CREATE INDEX webhooks_enabled ON webhooks (workspace_id) WHERE enabled;

-- How many enabled webhooks the workspace has, read with the chain-head lock by every append: at 0
-- the append writes no delivery rows and costs nothing more. Kept exact by every webhook change,
-- which takes the chain-head lock first (so an append either precedes a change or sees it).
ALTER TABLE chain_heads ADD COLUMN webhooks integer NOT NULL DEFAULT 0;

-- One delivery per (event, webhook), written in the event's own transaction. Its id is derived from
-- the pair (`dlv_` + the event id's time part + 16 hex digits of md5(event id ‖ webhook id)).
--   pending: waiting for its next attempt at next_attempt_at (or in flight: lease_token set, and
--            next_attempt_at is when the lease expires and another worker may take it);
--   paused:  its webhook is disabled; it resumes when the webhook is enabled again;
--   success / failed: finished (failed: its round of attempts ran out, or 410 Gone).
-- attempts counts the attempts made; a redelivery starts a new round at round_start = attempts.
CREATE TABLE webhook_deliveries (
  id              text PRIMARY KEY,
  workspace_id    text NOT NULL,
  webhook_id      text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  event_sequence  bigint NOT NULL,
  event_id        text NOT NULL,
  event_type      text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'paused', 'success', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  round_start     integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  lease_token     text,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, status, created_at);

-- Every attempt, as the API reports it (the history of GET /webhooks/:id?includeDeliveries=true).
CREATE TABLE webhook_attempts (
  delivery_id      text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt          integer NOT NULL,
  webhook_id       text NOT NULL,
  event_id         text NOT NULL,
  event_type       text NOT NULL,
  status           text NOT NULL CHECK (status IN ('success', 'failed')),
  status_code      integer,
  response_time_ms integer NOT NULL,
  error            text,
  attempted_at     timestamptz NOT NULL,
  next_retry_at    timestamptz,
  PRIMARY KEY (delivery_id, attempt)
);
CREATE INDEX webhook_attempts_by_webhook ON webhook_attempts (webhook_id, attempted_at DESC) INCLUDE (status);
