-- The normalisation each text was fingerprinted with (textFingerprint.ts, FOLD_VERSION). Version 2 (2026-11-29)
-- folds Armenian lookalikes, the Latin small capitals and a few more Cyrillic and Greek letters into the Latin
-- letter they imitate, and folds a capital through its small letter. A text stored before holds the rows of
-- version 1, which a copy folded by version 2 would not find when the text itself holds one of those letters.
-- The class below is every code point whose version-1 and version-2 folds differ (a test derives it again): a
-- text holding none of them has the same rows under both and is labelled 2; one holding any is labelled 1 and
-- fingerprinted again by the service when it starts (ContentService), from its stored text.
ALTER TABLE content_items ADD COLUMN fingerprint_fold smallint;
UPDATE content_items SET fingerprint_fold = CASE
    WHEN convert_from(decode(asset, 'base64'), 'UTF8') ~ '[\u01A6\u0262\u026A\u0274\u028F\u0299\u029C\u029F\u037F\u038F\u03A9\u03F3\u0403\u0413\u042C\u0460\u0461\u0474-\u0477\u04AE\u04AF\u04BA\u04BC\u04BD\u04C0\u0500\u050C\u051A\u051C\u0531\u0533\u0536\u0540\u0548\u054C\u054D\u054F\u0551\u0554\u0555\u0561\u0563\u0566\u0570\u0578\u057C\u057D\u0581\u0584\u0585\u1D00\u1D04\u1D05\u1D07\u1D0A\u1D0B\u1D0D\u1D0F\u1D18\u1D1B\u1D1C\u1D20-\u1D22\u1DA6\u1DAB\u1DB0\u1DB8\u1F68-\u1F6F\u1FA8-\u1FAF\u1FFA-\u1FFC\u2126\u2C6D\u33C0\u33C1\uA730\uA731\uA7AC\uA7AE\uA7AF\U00010784\U00010792\U00010796\U000107B2\U0001D6C0\U0001D6FA\U0001D734\U0001D76E\U0001D7A8\U0001E04F]' THEN 1 ELSE 2 END
  WHERE kind = 'text';
-- Images have none. A text is written with it by the service; the benchmark's seeded texts (tooling/bench), written
-- without it, are left alone (NULL is never fingerprinted again).
ALTER TABLE content_items ADD CONSTRAINT content_items_fingerprint_fold
  CHECK (kind = 'text' OR fingerprint_fold IS NULL);
-- What the start looks for: the texts of an older fold only, without reading every item on every start.
CREATE INDEX content_items_text_fold ON content_items (fingerprint_fold) WHERE kind = 'text';
