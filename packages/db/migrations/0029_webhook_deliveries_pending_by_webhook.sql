-- Per-webhook shares (fourth pass, 2026-11-29): a worker gives one webhook at most a share of its attempts in flight,
-- so that a receiver that never answers holds only its own share and its workspace's other webhooks keep being
-- delivered (before, it took its whole workspace's share for the length of its time-outs). The claim reads each
-- webhook's earliest due deliveries, up to the room its share leaves, through this index; ties of due time in the
-- events' order, as in webhook_deliveries_pending_by_workspace.
CREATE INDEX webhook_deliveries_pending_by_webhook ON webhook_deliveries (webhook_id, next_attempt_at, event_sequence)
  WHERE status = 'pending';
