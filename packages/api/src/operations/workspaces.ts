import {
  ApiKeyWithSecret,
  CreateWorkspace,
  PageOf,
  UpdateWorkspace,
  Workspace,
  WorkspaceService,
} from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idAnd, idField, pageFields, REDACTED_SECRET } from "./common.ts"

const tag = "Workspaces"

export const workspaceOperations = [
  defineOperation({
    name: "workspaces.create",
    method: "POST",
    path: "/workspaces",
    scope: "workspaces:admin",
    tag,
    summary: "Create a workspace",
    description:
      "Creates a workspace with its own audit chain and returns its first all-scope workspace key, shown once.",
    successStatus: 201,
    input: CreateWorkspace,
    output: Schema.Struct({ workspace: Workspace, apiKey: ApiKeyWithSecret }).annotate({
      identifier: "CreatedWorkspace",
    }),
    redactForReplay: (created: { workspace: Workspace; apiKey: ApiKeyWithSecret }) => ({
      ...created,
      apiKey: { ...created.apiKey, apiKey: REDACTED_SECRET },
    }),
    handler: (input, actor) => WorkspaceService.use((s) => s.create(actor, input)),
  }),
  defineOperation({
    name: "workspaces.list",
    method: "GET",
    path: "/workspaces",
    scope: "workspaces:read",
    tag,
    summary: "List workspaces",
    description: "The caller's own workspace; every workspace with `workspaces:admin`.",
    paginated: true,
    input: Schema.Struct(pageFields),
    output: PageOf(Workspace),
    handler: (input, actor) => WorkspaceService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "workspaces.get",
    method: "GET",
    path: "/workspaces/:id",
    scope: "workspaces:read",
    tag,
    summary: "Get a workspace",
    errors: ["WORKSPACE_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: Workspace,
    handler: (input, actor) => WorkspaceService.use((s) => s.get(actor, input.id)),
  }),
  defineOperation({
    name: "workspaces.update",
    method: "PATCH",
    path: "/workspaces/:id",
    scope: "workspaces:write",
    tag,
    summary: "Update a workspace",
    description: "`environment` is fixed at creation. Changing `plan` needs `workspaces:admin`.",
    errors: ["WORKSPACE_NOT_FOUND"],
    input: idAnd(UpdateWorkspace),
    output: Workspace,
    handler: ({ id, ...patch }, actor) => WorkspaceService.use((s) => s.update(actor, id, patch)),
  }),
  defineOperation({
    name: "workspaces.delete",
    method: "DELETE",
    path: "/workspaces/:id",
    scope: "workspaces:admin",
    tag,
    summary: "Delete a workspace",
    description:
      "Soft-deletes the workspace, revokes its keys and deregisters its agents (each with `agent.deregistered`, before `workspace.deleted`); its audit chain is kept. A credential cannot delete its own workspace.",
    errors: ["WORKSPACE_NOT_FOUND", "WORKSPACE_IN_USE"],
    input: Schema.Struct(idField),
    output: Workspace,
    handler: (input, actor) => WorkspaceService.use((s) => s.remove(actor, input.id)),
  }),
]
