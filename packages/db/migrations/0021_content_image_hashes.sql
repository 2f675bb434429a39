-- The image multi-index as one row per indexed hash (an item's pHash and its mirror's) with its four 16-bit
-- blocks as columns, and an index per block on (workspace tag, block) carrying the whole hash, in place of
-- one row per block (0014, 0016). Measured at 1,000,000 images (EXPLAIN (ANALYZE, BUFFERS), docs/content.md):
-- a probe through 0016's index (548 lookups; the workspace id and item id in every entry, 800 MB) touched
-- ~4,500 buffers; here (428 lookups, 60 MB an index) ~1,340. One row per block with a compact key was no
-- better (~9,200): its 8,000,000-row heap spans several visibility-map pages, re-read as the entries met
-- alternate between them; 2,000,000 rows keep the map on one page.
-- `tag` is hashtext(workspace_id): a 4-byte stand-in for the workspace in the indexes. Two workspaces may
-- share a tag, so the lookup checks each found item's own workspace (content_items) before answering.
CREATE TABLE content_image_hashes (
  content_id text NOT NULL REFERENCES content_items (id) ON DELETE CASCADE,
  mirror     boolean NOT NULL,
  hash       bigint NOT NULL,
  tag        integer NOT NULL,
  b0         integer NOT NULL,
  b1         integer NOT NULL,
  b2         integer NOT NULL,
  b3         integer NOT NULL
);
INSERT INTO content_image_hashes (content_id, mirror, hash, tag, b0, b1, b2, b3)
  SELECT c.id, h.mirror, h.hash, hashtext(c.workspace_id), (h.hash >> 48) & 65535, (h.hash >> 32) & 65535,
    (h.hash >> 16) & 65535, h.hash & 65535
  FROM content_items c
    CROSS JOIN LATERAL (VALUES (('x' || c.phash)::bit(64)::bigint, false), (('x' || c.mirror_phash)::bit(64)::bigint, true))
      AS h(hash, mirror)
  WHERE c.kind = 'image';
-- Block 0's index has the hash as a key column: it also finds the row of a given hash, for its item.
CREATE INDEX content_image_hashes_b0 ON content_image_hashes (tag, b0, hash);
CREATE INDEX content_image_hashes_b1 ON content_image_hashes (tag, b1) INCLUDE (hash);
CREATE INDEX content_image_hashes_b2 ON content_image_hashes (tag, b2) INCLUDE (hash);
CREATE INDEX content_image_hashes_b3 ON content_image_hashes (tag, b3) INCLUDE (hash);
DROP TABLE content_image_blocks;
