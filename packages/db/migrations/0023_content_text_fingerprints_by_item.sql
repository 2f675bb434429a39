-- An item's fingerprints by item: the fingerprint count every item read shows (`GET /content/:id`, each row of
-- `GET /content`, the answer of `POST /content`) was counted by a sequential scan of every workspace's
-- fingerprints (6,000,000 rows at 100,000 texts), and deleting an item (ON DELETE CASCADE) had to scan them too.
CREATE INDEX content_text_fingerprints_by_item ON content_text_fingerprints (content_id);
