-- Policies (decision D6): the current document of each policy, and every version it had.
-- A change is announced on the agentgov_policies channel (payload: the workspace id) in its
-- own transaction, so every instance recompiles that workspace's set at commit.

CREATE TABLE policies (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id),
  name         text NOT NULL,
  version      integer NOT NULL,
  document     jsonb NOT NULL,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  deleted_at   timestamptz
);
CREATE UNIQUE INDEX policies_name_unique ON policies (workspace_id, name) WHERE deleted_at IS NULL;
CREATE INDEX policies_by_workspace ON policies (workspace_id, id DESC) WHERE deleted_at IS NULL;

CREATE TABLE policy_versions (
  policy_id    text NOT NULL REFERENCES policies (id),
  version      integer NOT NULL,
  workspace_id text NOT NULL REFERENCES workspaces (id),
  document     jsonb NOT NULL,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (policy_id, version)
);

-- The guard caches agents (status, labels, version, trust score) per instance; any change to an agent row,
-- whichever service makes it, is announced at commit so that every instance drops its copy.
CREATE FUNCTION agentgov_agent_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentgov_agents', NEW.id);
  RETURN NEW;
END
$$;
CREATE TRIGGER agents_changed AFTER UPDATE ON agents FOR EACH ROW EXECUTE FUNCTION agentgov_agent_changed();
