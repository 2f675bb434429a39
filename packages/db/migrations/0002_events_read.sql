-- Audit trail read side: the client's own time of an ingested event, and recorded verifications.

ALTER TABLE events ADD COLUMN occurred_at timestamptz;

CREATE TABLE chain_verifications (
  id                 text PRIMARY KEY,
  workspace_id       text NOT NULL REFERENCES workspaces (id),
  trigger            text NOT NULL CHECK (trigger IN ('scheduled', 'api')),
  valid              boolean NOT NULL,
  checked            bigint NOT NULL,
  first_bad_sequence bigint,
  reason             text,
  verified_at        timestamptz NOT NULL
);
CREATE INDEX chain_verifications_by_workspace ON chain_verifications (workspace_id, verified_at DESC);
