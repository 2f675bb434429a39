-- The dashboard's overview (issue 33) counts each workspace's guard decisions per hour over the last day, and
-- those not allowed (denied or held for approval): the `policy.evaluated` events by time, counted from these
-- partial indexes (index-only where the pages are all-visible) instead of reading every decision's data.
CREATE INDEX events_decisions ON events (workspace_id, ts) WHERE type = 'policy.evaluated';
CREATE INDEX events_decisions_refused ON events (workspace_id, ts)
  WHERE type = 'policy.evaluated' AND (data->>'decision') <> 'allow';
