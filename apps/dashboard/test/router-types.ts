/**
 * Type-level test, checked by `npm run typecheck` (tsc; vitest does not run it): the dashboard's client is
 * typed by the router's own declaration, so a procedure or field that is renamed or removed fails the
 * typecheck and the build. Each `@ts-expect-error` is itself an error when what it expects stops failing.
 */
import { api, type Inputs, type Outputs } from "../src/api.ts"

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
const assert = <T extends true>(_?: T) => {}

// Fields the pages read exist with the types they expect.
assert<Equal<Outputs["agents"]["get"]["trustScore"], number>>()
assert<Equal<Outputs["agents"]["list"]["meta"]["hasMore"], boolean>>()
assert<Equal<Outputs["approvals"]["decide"]["status"], "expired" | "pending" | "approved" | "denied">>()
assert<Equal<Inputs["approvals"]["decide"]["decision"], "approved" | "denied">>()
assert<Equal<Outputs["guard"]["evaluate"]["decision"], "allow" | "deny" | "require_approval">>()
assert<Equal<Outputs["trust"]["score"]["components"][number]["weight"], number>>()

export const checks = async () => {
  // A query and a mutation as the pages call them.
  const page = await api.agents.list.query({ limit: 100, status: "active" })
  page.data[0]?.trustScore.toFixed()
  await api.approvals.decide.mutate({ id: "apr_x", decision: "approved", reason: "ok" })

  // @ts-expect-error a procedure the router does not have
  await api.agents.nope.query()
  // @ts-expect-error a field the agent does not have (renamed fields fail like this)
  page.data[0]?.trustScor
  // @ts-expect-error the decision is a closed set
  await api.approvals.decide.mutate({ id: "apr_x", decision: "maybe" })
  // @ts-expect-error `name` is required to register an agent
  await api.agents.create.mutate({ labels: [] })
}
