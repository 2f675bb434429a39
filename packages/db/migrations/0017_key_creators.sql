-- The person behind each API key (issue 32's review): the member whose dashboard session minted it (creating
-- or rotating), or whose key minted it, transitively. Removing that member from the workspace revokes the key.
-- NULL: the operator's (first start, CLI, workspace creation) or a key minted from one of those.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS created_by_user text;
CREATE INDEX IF NOT EXISTS api_keys_by_creator ON api_keys (workspace_id, created_by_user)
  WHERE status = 'active' AND created_by_user IS NOT NULL;

-- Keys made before this migration: their creator is on the audit trail (`apikey.created`, its actor). Every
-- statement may run again (a test replays the backfill).
UPDATE api_keys k SET created_by_user = e.actor_id
  FROM events e
  WHERE e.workspace_id = k.workspace_id AND e.type = 'apikey.created' AND e.actor_type = 'user'
    AND e.data->>'keyId' = k.id;
UPDATE api_keys k SET created_by_user = g.user_id
  FROM events e JOIN oauth_grants g ON g.id = e.actor_id
  WHERE e.workspace_id = k.workspace_id AND e.type = 'apikey.created' AND e.actor_type = 'oauth'
    AND e.data->>'keyId' = k.id;
-- A key minted with another key (or an SDK token of it) belongs to that key's person, however long the chain.
DO $$
BEGIN
  LOOP
    UPDATE api_keys k SET created_by_user = parent.created_by_user
      FROM events e JOIN api_keys parent ON parent.id = e.actor_id
      WHERE e.workspace_id = k.workspace_id AND e.type = 'apikey.created'
        AND e.actor_type IN ('api_key', 'sdk_token') AND e.data->>'keyId' = k.id
        AND k.created_by_user IS NULL AND parent.created_by_user IS NOT NULL;
    EXIT WHEN NOT FOUND;
  END LOOP;
END $$;
