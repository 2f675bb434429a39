-- Merkle leaves that cover attribution (issue 24). An event's leaf was SHA-256(0x00 ‖ its chain hash), which
-- covers type, data and timestamp but not who the event is attributed to: a changed agent_id verified. From
-- `attributed_from` on, a leaf also covers the event's id, agent_id, actor and occurred_at (see
-- `attributedLeaf` in @agentgov/verifier); the chain hash (D8) is unchanged. Events a checkpoint has already
-- signed keep their old leaves, so every signed checkpoint stays valid and consistent with the later ones; a
-- workspace created from now on has attributed leaves from event 1.
ALTER TABLE chain_heads ADD COLUMN attributed_from bigint NOT NULL DEFAULT 1;
UPDATE chain_heads h SET attributed_from =
  coalesce((SELECT max(c.tree_size) FROM checkpoints c WHERE c.workspace_id = h.workspace_id), 0) + 1;
-- Stored subtrees are only ever made for signed sizes; any reaching past them would mix leaf forms.
DELETE FROM merkle_nodes n USING chain_heads h
  WHERE n.workspace_id = h.workspace_id AND (n.idx + 1) * (1::int8 << n.level) > h.attributed_from - 1;

-- The checkpointer records the conflicts it refuses to sign over, as verification records its runs.
ALTER TABLE chain_verifications DROP CONSTRAINT chain_verifications_trigger_check;
ALTER TABLE chain_verifications ADD CONSTRAINT chain_verifications_trigger_check
  CHECK (trigger IN ('scheduled', 'api', 'checkpoint'));
