-- The webhook benchmark, after the guard's (2026-11-30): 760 deliveries/s instead of 2,400, PostgreSQL busy with the
-- claim. Statistics taken while the queue held no pending row (a quiet spell, all delivered) make a pending row look
-- rare; a backlog then came in faster than autovacuum analyses. The claim's scan of each webhook's earliest due
-- deliveries could then go through this index's (webhook_id, status) prefix, which serves `status = 'pending'` as
-- well as the partial index does at the estimated one row, and sort the webhook's whole backlog for each claim of
-- 100. Without `status` here, that path reads every row of the webhook, and the pending index is the cheaper one
-- whatever the statistics say. What else read it by status either has the pending index (pausing a webhook's
-- pending deliveries, the next due time) or is a rare operator's action bounded by the history's retention
-- (resuming paused ones, retrying failed ones); the purge of finished deliveries older than a date keeps its range
-- on created_at.
DROP INDEX webhook_deliveries_by_webhook;
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);
