-- The image multi-index carries the whole 64-bit hash of each block's row (the pHash, or its mirror's), and
-- its index covers it: a lookup checks the Hamming distance inside the index-only scan instead of fetching
-- every block-mate's item (at 1,000,000 images some 16,000 rows a probe) to check it.
ALTER TABLE content_image_blocks ADD COLUMN hash bigint;
UPDATE content_image_blocks b
  SET hash = ('x' || CASE WHEN b.mirror THEN c.mirror_phash ELSE c.phash END)::bit(64)::bigint
  FROM content_items c WHERE c.id = b.content_id;
ALTER TABLE content_image_blocks ALTER COLUMN hash SET NOT NULL;
DROP INDEX content_image_blocks_lookup;
CREATE INDEX content_image_blocks_lookup ON content_image_blocks (workspace_id, block, value)
  INCLUDE (hash, content_id, mirror);
