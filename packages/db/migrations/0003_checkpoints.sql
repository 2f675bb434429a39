-- Signing keys (checkpoints now, SDK tokens next), the Merkle tree's stored
-- subtrees and signed checkpoints of each workspace's audit trail.

-- Ed25519 keys. The public JWK is published; the private key is stored
-- encrypted with the operator's master key (AES-256-GCM) and erased when the
-- key retires. A key is published from created_at and signs from activates_at.
CREATE TABLE signing_keys (
  kid          text PRIMARY KEY,
  public_jwk   jsonb NOT NULL,
  private_key  text,
  created_at   timestamptz NOT NULL,
  activates_at timestamptz NOT NULL,
  retires_at   timestamptz
);

-- Roots of the perfect, aligned subtrees of 256 leaves and more (level 8 and
-- up, idx counted at that level). Smaller subtrees are hashed from the
-- events' own hashes when a proof needs them.
CREATE TABLE merkle_nodes (
  workspace_id text NOT NULL REFERENCES workspaces (id),
  level        smallint NOT NULL,
  idx          bigint NOT NULL,
  hash         text NOT NULL,
  PRIMARY KEY (workspace_id, level, idx)
);

CREATE TABLE checkpoints (
  workspace_id text NOT NULL REFERENCES workspaces (id),
  tree_size    bigint NOT NULL,
  root_hash    text NOT NULL,
  head_hash    text NOT NULL,
  signed_at    timestamptz NOT NULL,
  kid          text NOT NULL REFERENCES signing_keys (kid),
  signature    text NOT NULL,
  PRIMARY KEY (workspace_id, tree_size)
);
