-- The webhook benchmark, after the guard's (2026-11-30): 760 deliveries/s instead of 2,400, PostgreSQL busy with the
-- claim. Statistics taken while the queue held no pending row (a quiet spell, all delivered) make a pending row look
-- rare and the pending indexes nearly empty; a backlog then came in faster than autovacuum analyses. The planner then
-- read each webhook's whole backlog where it meant to read its first rows: through (webhook_id, status, created_at),
-- which serves `status = 'pending'` as the partial indexes do, sorting it; or by walking one pending index whole
-- (the other's lookups, the per-candidate row lookups), which a 1-row estimate makes look as cheap as a descent.
--
-- Now one pending index, keyed by workspace, then webhook, then due time: the walk over workspaces with pending rows
-- reads its first column, and a webhook's earliest due rows are one descent that every query names in full
-- (workspace and webhook). Any other path to them reads more than the estimate says (the history index below, every
-- row of the webhook; a walk of this one, all pending rows), so it is the cheap one whatever the statistics.
-- The history index loses `status`: pausing a webhook's pending deliveries and the next due time have this index,
-- the purge of finished deliveries older than a date keeps its range on created_at, and resuming a webhook's paused
-- deliveries or sending its failed ones again (both under the workspace's chain lock) read a small partial index of
-- their own rather than the webhook's 30 days of history (a review measured 300,049 entries read for one resume).
DROP INDEX webhook_deliveries_by_webhook;
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX webhook_deliveries_held ON webhook_deliveries (webhook_id, created_at) WHERE status IN ('paused', 'failed');
DROP INDEX webhook_deliveries_pending_by_workspace;
DROP INDEX webhook_deliveries_pending_by_webhook;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (workspace_id, webhook_id, next_attempt_at, event_sequence)
  WHERE status = 'pending';
