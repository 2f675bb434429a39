-- A deny rule may enforce automatically after N denials of an agent within a window (a rule's `enforce`):
-- the guard counts the agent's recent policy.denied events when such a rule denies it. Only denials are
-- indexed, so the index costs nothing on the other events.
CREATE INDEX events_denials ON events (workspace_id, agent_id, ts) WHERE type = 'policy.denied';
