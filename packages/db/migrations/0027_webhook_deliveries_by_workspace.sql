-- Fair claims (outside review, 2026-11-29): a worker takes each workspace's earliest due deliveries in turn, up to
-- a share of its attempts in flight, so that one workspace's backlog to endpoints that never answer cannot hold
-- every other workspace's webhooks for the length of its time-outs. The claim and the next due time walk the
-- workspaces with pending deliveries through this index (one descent each) and read each one's due rows in order
-- from it. It replaces the index by due time alone, which the planner preferred for those per-workspace reads
-- (scanning past a large workspace's rows to find a small one's: 1 ms a workspace at 20,000 rows, against 0.01).
-- Ties of due time (every delivery of one append is due at once) go in the events' order, as the index holds them.
CREATE INDEX webhook_deliveries_pending_by_workspace ON webhook_deliveries (workspace_id, next_attempt_at, event_sequence)
  WHERE status = 'pending';
DROP INDEX webhook_deliveries_due;
