/**
 * How long a stopping worker waits for the work it has in flight (webhook attempts; passes of the trust and compliance
 * workers and of the server's periodic jobs) before it leaves it to its leases and cursors.
 */
export const STOP_GRACE_MS = 5_000

/** Resolves once every one of `all` has settled, or after `ms` (the domain's, which its layers' finalizers use too). */
export { settledWithin } from "@agentgov/domain"
