export { C2paSigner, type C2paSigning } from "./C2paSigner.ts"
export * from "./Content.ts"
export * from "./ContentErrors.ts"
export {
  ContentService,
  IMAGE_RECORD_THRESHOLD,
  TAKEDOWNS_PER_DAY,
  TEXT_LOOKUP_SQL,
  TEXT_RECORD_THRESHOLD,
} from "./ContentService.ts"
export { ContentSettings, type ContentSettingsShape } from "./ContentSettings.ts"
export { issueCredential, type ManifestReading, readManifest, SOFT_BINDING_ALG, signManifest } from "./c2pa.ts"
export {
  hamming,
  hashColumn,
  hashImage,
  IMAGE_INDEX_INSERT_SQL,
  IMAGE_RADIUS,
  indexRows,
  MAX_INPUT_PIXELS,
} from "./imageHash.ts"
export { type ImageHit, type ImageQuery, lookupImage } from "./imageIndex.ts"
export { type NoticeDelivery, SMTP_TIMEOUT_MS, sendNotice as sendMail } from "./takedownNotice.ts"
export {
  candidateFingerprints,
  fingerprintText,
  normalizeText,
  tokenize,
  WINDOW as TEXT_FINGERPRINT_WINDOW,
} from "./textFingerprint.ts"
export { detectWatermark, embedWatermark, MIN_WATERMARK_SIDE, PSNR_FLOOR } from "./watermark.ts"
