-- The winnowing window each text was fingerprinted with, so that its `fingerprint.algorithm` names it
-- ("winnow-5w4-minhash64" or "winnow-5w8-minhash64"). Texts registered until 2026-11-27 were winnowed with a
-- window of 4 shingles, later ones with 8 (docs/content.md); both kinds of rows stay valid for scanning.
-- The rows written before this migration do not store their window, but it shows in them: every window of w
-- shingles holds a kept one, so with w = 4 no two kept positions are more than 4 apart, counting from position
-- -1 before the first and to the shingle count after the last. A text winnowed with 8 passes that test only when
-- it has 7 shingles or fewer (11 words), where both windows keep nearly the same: in 20,000 random texts of each
-- length it passed at 5, 6 and 7 shingles (60%, 34%, 14%) and never at 8, 9 or 100.
ALTER TABLE content_items ADD COLUMN fingerprint_window smallint;
UPDATE content_items c SET fingerprint_window = CASE WHEN (
    SELECT coalesce(max(gap), 0) FROM (
      SELECT p - coalesce(lag(p) OVER (ORDER BY p), -1) AS gap
      FROM (SELECT DISTINCT f.pos AS p FROM content_text_fingerprints f WHERE f.content_id = c.id
            UNION SELECT greatest(c.words - 4, 0)) kept
    ) gaps) <= 4 THEN 4 ELSE 8 END
  WHERE kind = 'text';
ALTER TABLE content_items ADD CONSTRAINT content_items_fingerprint_window
  CHECK ((kind = 'text') = (fingerprint_window IS NOT NULL));
