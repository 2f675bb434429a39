-- The image multi-index moves into each server process (decision D15, docs/content.md): the scan probes a copy
-- of the workspace's indexed pHashes held in counting-sorted arrays, and reads back from this table only the
-- rows it found. Measured at 1,000,000 images (2,000,000 hashes), the 428 index lookups through 0021's four block
-- indexes met ~13,000 entries and ~1,350 buffers a probe, 2.8–3.8 ms of execution and 4–5 ms p50 end to end on
-- the shared machine; the copy is probed in well under a millisecond.
-- Each row now says which transaction wrote it (`xid`) and has a number of its own (`seq`): a server brings its
-- copy up to the table before each scan by reading only the rows its previous read's snapshot could not see
-- (written by a transaction running then, or started since), through (tag, xid); the first read of a workspace
-- goes through (tag, seq) in chunks, and the rows found are read back by (tag, seq) with their item, whose
-- workspace and existence are checked there.
ALTER TABLE content_image_hashes ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE content_image_hashes ADD COLUMN xid xid8 NOT NULL DEFAULT '0';
ALTER TABLE content_image_hashes ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX content_image_hashes_by_seq ON content_image_hashes (tag, seq) INCLUDE (hash);
CREATE INDEX content_image_hashes_by_xid ON content_image_hashes (tag, xid);
-- The per-block indexes and columns served only the lookup in SQL.
DROP INDEX content_image_hashes_b0;
DROP INDEX content_image_hashes_b1;
DROP INDEX content_image_hashes_b2;
DROP INDEX content_image_hashes_b3;
ALTER TABLE content_image_hashes DROP COLUMN b0, DROP COLUMN b1, DROP COLUMN b2, DROP COLUMN b3;
