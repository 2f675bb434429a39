-- Event data is stored as the exact JCS text that was hashed (type json keeps
-- its input text verbatim; jsonb re-orders keys). Verification then hashes
-- the stored text without parsing it, and re-canonicalises only a row whose
-- text is not canonical (rows written before this migration).
ALTER TABLE events ALTER COLUMN data TYPE json USING data::json;
