import { Overview, OverviewService } from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"

export const overviewOperations = [
  defineOperation({
    name: "overview.get",
    method: "GET",
    path: "/overview",
    scope: "events:read",
    tag: "Overview",
    summary: "Get the workspace's overview",
    description:
      "The workspace at a glance, workspace-wide: its agents by trust tier (with `agents:read`), guard decisions and denials per hour over the last 24 hours, pending approvals with the newest five (with `approvals:read`), and the chain's head, newest signed checkpoint and last verification as stored (nothing is signed or verified by this read). What the dashboard's overview shows. Not for agent-bound credentials.",
    input: Schema.Struct({}),
    output: Overview,
    handler: (_input, actor) => OverviewService.use((s) => s.get(actor)),
  }),
]
