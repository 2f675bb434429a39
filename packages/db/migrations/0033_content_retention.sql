-- The texts still to be fingerprinted again under the current fold (FOLD_VERSION 3, textFingerprint.ts): the
-- refold worker of ContentService takes them a batch at a time (FOR UPDATE SKIP LOCKED, oldest fold first) in the
-- background, and checks whether any is left, through this index rather than a scan of every item. It is empty
-- once they are done (registrations are stored at the current fold). A later fold version adds its own.
CREATE INDEX content_items_refold_pending ON content_items (fingerprint_fold, id)
  WHERE kind = 'text' AND fingerprint_fold < 3;

-- The takedowns citing a match: the purge of old matches (ContentService.purgeMatches) keeps those a takedown
-- cites, and checks each candidate here.
CREATE INDEX content_takedowns_by_match ON content_takedowns (match_id) WHERE match_id IS NOT NULL;
