-- The group-commit appender's one-statement path (AuditLog.appendAt) also claims the batch's
-- Idempotency-Keys. When one of them is already taken, or the chain head is no longer the one the batch
-- was hashed after, that statement must write nothing at all, claims included: it calls this to abort,
-- and the appender retries the batch on the locked path, which replays or refuses each taken key.
CREATE FUNCTION agentgov_abort_append() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'append aborted: a key was taken or the chain head moved' USING ERRCODE = 'AGA01';
END
$$;
