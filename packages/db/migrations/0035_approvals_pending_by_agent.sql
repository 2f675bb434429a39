-- The guard's two reads of an agent's approvals (a review, 2026-11-30, EXPLAIN ANALYZE with statistics of a quiet
-- spell: every approval decided when last analysed, then a backlog of pending ones):
-- - the count of the agent's pending approvals (its cap of 100) went through (workspace_id, status, id DESC), reading
--   every pending approval of the workspace (4,995 entries to count 100), and with fresh statistics through a bitmap
--   of the pending expiry index and the agent's whole history (5,600). This index is keyed by the agent alone: the
--   count names the agent (an agent's id is its table's primary key, so it names the workspace too) and not the
--   workspace, and no other index starts with agent_id, so this one is its only path whatever the statistics; the
--   workspace's pending list (workspace_id first) cannot take it.
-- - the standing request or refusal of one binding read the agent's whole history (approvals_by_agent); this index
--   reads that binding's approvals.
CREATE INDEX approvals_pending_by_agent ON approvals (agent_id, expires_at) WHERE status = 'pending';
CREATE INDEX approvals_by_binding ON approvals (workspace_id, agent_id, binding_hash);
