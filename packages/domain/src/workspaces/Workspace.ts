import { Schema } from "effect"
import { DisplayName, Id, Timestamp } from "../shared/schemas.ts"

export const Environment = Schema.Literals(["live", "test"])
export const Plan = Schema.Literals(["free", "pro", "enterprise"])
export const GuardDefault = Schema.Literals(["allow", "deny"])
export type Environment = typeof Environment.Type
export type Plan = typeof Plan.Type

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
