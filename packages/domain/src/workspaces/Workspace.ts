import { Schema } from "effect"
import { Id, Name, Timestamp } from "../shared/schemas.ts"

export const Environment = Schema.Literals(["live", "test"])
export const Plan = Schema.Literals(["free", "pro", "enterprise"])
export const GuardDefault = Schema.Literals(["allow", "deny"])
export type Environment = typeof Environment.Type
export type Plan = typeof Plan.Type

/**
 * What a displayed name must not hold: C0 and C1 controls (ESC starts a terminal escape sequence, a newline
 * forges a line in a log or a chat message), the line and paragraph separators, and the bidirectional
 * embeddings, overrides and isolates (they reorder what is shown: "Trojan Source").
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are what is refused
export const UNSHOWABLE_CHARS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

/** A stored name as text for a terminal or a log line: each unshowable character written as a `\u` escape. */
export const escapeUnshowable = (name: string): string =>
  name.replace(UNSHOWABLE_CHARS, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** The checks of a string people read as one line (a name, a version): none of UNSHOWABLE_CHARS, not padded. */
export const showable = () =>
  [
    Schema.makeFilter(
      (s: string) =>
        s.search(UNSHOWABLE_CHARS) === -1 ||
        "must not contain control characters, line separators or bidirectional controls",
    ),
    Schema.makeFilter((s: string) => s.trim() === s || "must not begin or end with whitespace"),
  ] as const

/**
 * The name of a workspace or an agent: shown in the dashboard, on public badges, in chat messages and on the
 * operator's terminal. 1..200 characters, none of UNSHOWABLE_CHARS, no whitespace at either end (so not
 * blank). Services store it in Unicode NFC, so names that look alike are equal.
 */
export const DisplayName = Name.check(...showable()).annotate({
  description:
    "1..200 characters, without control characters, line separators or bidirectional controls, and without whitespace at either end; stored in Unicode NFC",
})

export const Workspace = Schema.Struct({
  id: Id("ws"),
  name: Schema.String,
  environment: Environment,
  plan: Plan,
  guardDefault: GuardDefault.annotate({ description: "the guard's decision when no policy matches" }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}).annotate({ identifier: "Workspace" })
export type Workspace = typeof Workspace.Type

export const CreateWorkspace = Schema.Struct({
  name: DisplayName,
  environment: Schema.optionalKey(Environment).annotate({ description: "fixed at creation; default `live`" }),
  plan: Schema.optionalKey(Plan),
  guardDefault: Schema.optionalKey(GuardDefault),
}).annotate({ identifier: "CreateWorkspace" })
export type CreateWorkspace = typeof CreateWorkspace.Type

export const UpdateWorkspace = Schema.Struct({
  name: Schema.optionalKey(DisplayName),
  plan: Schema.optionalKey(Plan.annotate({ description: "changing the plan needs `workspaces:admin`" })),
  guardDefault: Schema.optionalKey(GuardDefault),
}).annotate({ identifier: "UpdateWorkspace" })
export type UpdateWorkspace = typeof UpdateWorkspace.Type
