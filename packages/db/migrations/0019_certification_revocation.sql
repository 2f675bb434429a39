-- An operator may revoke a certification (POST /compliance/certifications/:id/revoke, issue 30): the reason
-- 'revoked_by_operator', the credential that revoked it and the operator's own words, beside the automatic
-- reasons (a suspension, a revocation, a fall below bronze), which leave both empty.
ALTER TABLE certifications DROP CONSTRAINT certifications_revoked_reason_check;
ALTER TABLE certifications ADD CONSTRAINT certifications_revoked_reason_check
  CHECK (revoked_reason IN ('agent_suspended', 'agent_revoked', 'trust_below_bronze', 'revoked_by_operator'));
ALTER TABLE certifications ADD COLUMN revoked_by text;
ALTER TABLE certifications ADD COLUMN revocation_note text;
ALTER TABLE certifications ADD CONSTRAINT certifications_operator_revocation
  CHECK ((revoked_reason = 'revoked_by_operator') = (revoked_by IS NOT NULL AND revocation_note IS NOT NULL));
