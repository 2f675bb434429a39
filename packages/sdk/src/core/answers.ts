/**
 * Checks of the `data` of answers the SDK acts on by itself: a 2xx whose envelope holds something else
 * (a proxy's stand-in, a cache serving another route, an incompatible service) is an `INVALID_RESPONSE`,
 * treated as the service being unavailable, not read as a decision, a token or an acknowledgement.
 * Each returns what is wrong, or undefined when the data has the shape the SDK relies on.
 */
import { isObject } from "./json.ts"

export type AnswerCheck = (data: unknown) => string | undefined

const DECISIONS: ReadonlySet<unknown> = new Set(["allow", "deny", "require_approval"])

/** A guard's `GuardResult` (D6): what `guard()` and `governed()` decide on. */
export const checkGuardResult: AnswerCheck = (data) => {
  if (!isObject(data)) return "the guard's answer is not an object"
  if (!DECISIONS.has(data.decision)) return `the guard's answer has no decision (got ${JSON.stringify(data.decision)})`
  if (typeof data.allowed !== "boolean") return "the guard's answer has no allowed"
  if (data.allowed !== (data.decision === "allow")) {
    return `the guard's answer contradicts itself (decision ${data.decision}, allowed ${data.allowed})`
  }
  if (!Array.isArray(data.reasons) || !data.reasons.every((r) => isObject(r) && typeof r.code === "string")) {
    return "the guard's answer has no reasons"
  }
  if (!Array.isArray(data.matched)) return "the guard's answer has no matched"
  if (typeof data.eventId !== "string") return "the guard's answer has no eventId"
  if (data.approvalId !== undefined && typeof data.approvalId !== "string")
    return "the guard's approvalId is not a string"
  return undefined
}

/** An ingest's `IngestResult`: one entry per event sent, so that the batch counts as stored. */
export const checkIngestResult =
  (sent: number): AnswerCheck =>
  (data) => {
    if (!isObject(data) || !Array.isArray(data.events)) return "the ingest answer has no events"
    if (data.events.length !== sent) {
      return `the ingest answer acknowledges ${data.events.length} event(s) of the ${sent} sent`
    }
    if (!data.events.every((e) => isObject(e) && typeof e.id === "string"))
      return "the ingest answer's events have no id"
    return undefined
  }

/** An SDK token exchange's answer (D5): the token is sent on every call that follows. */
export const checkSdkToken: AnswerCheck = (data) => {
  if (!isObject(data) || typeof data.token !== "string" || data.token === "") return "the token answer has no token"
  if (typeof data.expiresAt !== "string" || Number.isNaN(Date.parse(data.expiresAt))) {
    return "the token answer has no expiresAt"
  }
  return undefined
}

const APPROVAL_STATUSES: ReadonlySet<unknown> = new Set(["pending", "approved", "denied", "expired"])

/**
 * An approval's answer (`GET /approvals/:id`) that `waitForApproval()` and `governed()` act on: this approval
 * (a cache answering another route would hand over another one's decision), one of the four statuses, and a date
 * in `expiresAt` (the wait checks again at that instant). Anything else is not a decision, not even a denial.
 */
export const checkApproval =
  (approvalId: string): AnswerCheck =>
  (data) => {
    if (!isObject(data)) return "the approval answer is not an object"
    if (data.id !== approvalId)
      return `the approval answer is not approval ${approvalId} (got ${JSON.stringify(data.id)})`
    if (!APPROVAL_STATUSES.has(data.status)) {
      return `the approval answer has no status (got ${JSON.stringify(data.status)})`
    }
    if (typeof data.expiresAt !== "string" || Number.isNaN(Date.parse(data.expiresAt))) {
      return "the approval answer has no expiresAt"
    }
    return undefined
  }
