-- Trust scores (D11–D13). The trust worker follows each workspace's audit trail from a durable cursor and
-- keeps, per agent, the evidence it has read so far (decayed counters, see docs/trust.md) and the score they
-- give. The cursor, the evidence, the score and the trust events it emits commit in one transaction, so a
-- crash resumes from the cursor with nothing lost and nothing emitted twice.

CREATE TABLE trust_cursors (
  workspace_id text PRIMARY KEY REFERENCES workspaces (id),
  -- The last event of the workspace's chain whose evidence is in trust_scores.
  sequence     bigint NOT NULL,
  -- The last time every agent of the workspace was recomputed for decay and tenure.
  swept_at     timestamptz,
  updated_at   timestamptz NOT NULL
);

CREATE TABLE trust_scores (
  agent_id        text PRIMARY KEY REFERENCES agents (id),
  workspace_id    text NOT NULL REFERENCES workspaces (id),
  evidence        jsonb NOT NULL,
  -- The score as last computed, with its components (D12's breakdown).
  score           integer NOT NULL CHECK (score BETWEEN 0 AND 1000),
  components      jsonb NOT NULL,
  computed_at     timestamptz NOT NULL,
  -- The score last announced (trust.score.changed), which agents.trust_score holds for the guard.
  published_score integer NOT NULL CHECK (published_score BETWEEN 0 AND 1000),
  -- The badge tier the agent was last recorded to hold (badge.earned / badge.revoked); null: none.
  badge_tier      text CHECK (badge_tier IN ('bronze', 'silver', 'gold', 'platinum'))
);
CREATE INDEX trust_scores_by_workspace ON trust_scores (workspace_id, agent_id);

-- Every announced score, for the reputation chart.
CREATE TABLE trust_history (
  workspace_id text NOT NULL,
  agent_id     text NOT NULL REFERENCES agents (id),
  at           timestamptz NOT NULL,
  score        integer NOT NULL,
  tier         text NOT NULL
);
CREATE INDEX trust_history_by_agent ON trust_history (agent_id, at DESC);

-- Operators' adjustments (POST /trust/score/:agentId/adjustments); each is also an event on the trail.
CREATE TABLE trust_adjustments (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id),
  agent_id     text NOT NULL REFERENCES agents (id),
  delta        integer NOT NULL,
  reason       text NOT NULL,
  created_by   text NOT NULL,
  created_at   timestamptz NOT NULL
);
CREATE INDEX trust_adjustments_by_agent ON trust_adjustments (workspace_id, agent_id, id DESC);
