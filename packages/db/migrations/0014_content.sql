-- Content protection (decision D15): registered items, their fingerprints, matches and takedowns.
-- (Another branch may take 0013 too: this file only adds tables, so it renumbers freely.)

CREATE TABLE content_items (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL REFERENCES workspaces (id),
  kind          text NOT NULL CHECK (kind IN ('text', 'image')),
  title         text NOT NULL,
  media_type    text NOT NULL,
  metadata      jsonb NOT NULL DEFAULT '{}',
  -- The protected asset as served (watermarked and signed when asked), base64.
  asset         text NOT NULL,
  sha256        text NOT NULL,
  width         integer,
  height        integer,
  -- text: word count and MinHash signature; image: pHash and dHash of the image and its mirror (hex).
  words         integer,
  minhash       jsonb,
  phash         text,
  dhash         text,
  mirror_phash  text,
  mirror_dhash  text,
  watermarked   boolean NOT NULL,
  watermark_psnr double precision,
  c2pa          jsonb,
  agent_id      text,
  created_by    text NOT NULL,
  created_at    timestamptz NOT NULL
);
CREATE INDEX content_items_by_workspace ON content_items (workspace_id, id DESC);

-- The inverted index of winnowed text fingerprints: hash → (item, word position).
CREATE TABLE content_text_fingerprints (
  workspace_id text NOT NULL,
  hash         bigint NOT NULL,
  content_id   text NOT NULL REFERENCES content_items (id) ON DELETE CASCADE,
  pos          integer NOT NULL
);
CREATE INDEX content_text_fingerprints_lookup ON content_text_fingerprints (workspace_id, hash);

-- Multi-index hashing of image pHashes: each 64-bit hash (and its mirror's) as four 16-bit blocks, looked up
-- exactly per block, then verified on the whole hash.
CREATE TABLE content_image_blocks (
  workspace_id text NOT NULL,
  block        smallint NOT NULL,
  value        integer NOT NULL,
  content_id   text NOT NULL REFERENCES content_items (id) ON DELETE CASCADE,
  mirror       boolean NOT NULL
);
CREATE INDEX content_image_blocks_lookup ON content_image_blocks (workspace_id, block, value);

CREATE TABLE content_matches (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL,
  content_id    text NOT NULL REFERENCES content_items (id),
  method        text NOT NULL,
  similarity    double precision NOT NULL,
  evidence      jsonb NOT NULL,
  url           text,
  created_at    timestamptz NOT NULL
);
CREATE INDEX content_matches_by_item ON content_matches (workspace_id, content_id, id DESC);

CREATE TABLE content_takedowns (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL,
  content_id    text NOT NULL REFERENCES content_items (id),
  match_id      text REFERENCES content_matches (id),
  target_url    text NOT NULL,
  recipient     text NOT NULL,
  note          text,
  notice        text NOT NULL,
  status        text NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
  message_id    text,
  error         text,
  created_at    timestamptz NOT NULL,
  sent_at       timestamptz
);
CREATE INDEX content_takedowns_by_item ON content_takedowns (workspace_id, content_id, id DESC);

-- The service's C2PA signing credential, issued at first start by its own CA: the CA's and the signing
-- certificate's PEM, and the signing key sealed with the master key (as the other signing keys are).
CREATE TABLE c2pa_credentials (
  id          text PRIMARY KEY,
  ca_pem      text NOT NULL,
  cert_pem    text NOT NULL,
  sealed_key  text NOT NULL,
  created_at  timestamptz NOT NULL
);
