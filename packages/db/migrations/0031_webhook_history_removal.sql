-- Deleting a webhook (fifth pass, 2026-11-29) no longer removes its delivery history in its own transaction, which
-- holds the workspace's chain head: with 200,000 deliveries the cascade held every append of the workspace for
-- seconds. The delete removes the webhook row and records `webhook.deleted` with a row here, under the head's lock
-- for milliseconds; the delivery workers' purge then deletes the history in batches (its attempts by their cascade)
-- and the row here once none is left. The deliveries keep their webhook's id without a foreign key: nothing claims,
-- lists or counts a delivery but through its webhook's row (the claim walks each workspace's webhooks), and every
-- append moves the chain head a webhook change also moves, so no delivery is queued for a webhook being deleted.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_fkey;

CREATE TABLE webhooks_removed (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL,
  removed_at   timestamptz NOT NULL
);
