import { type AgentgovRouter, definedOperations, makeExecutor, makeTrpcRouter } from "@agentgov/api"
import { createTRPCClient, httpLink, TRPCClientError } from "@trpc/client"
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server"
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startTestServer, type TestServer, unique } from "./helpers.ts"

/**
 * The router's type as a client imports it: `createTRPCClient<AgentgovRouter>` knows every procedure, what it
 * takes and what it answers. The type-level lines below fail `npm run typecheck` if the router's type loses
 * its procedures (`@ts-expect-error` with nothing to expect is an error); the calls check the runtime router
 * is what the type says.
 */

let t: TestServer
const clientWith = (key: string) =>
  createTRPCClient<AgentgovRouter>({
    links: [httpLink({ url: `${t.url}/trpc`, headers: { authorization: `Bearer ${key}` } })],
  })
let client: ReturnType<typeof clientWith>

beforeAll(async () => {
  t = await startTestServer()
  client = clientWith(t.key)
})
afterAll(async () => t?.close())

type Inputs = inferRouterInputs<AgentgovRouter>
type Outputs = inferRouterOutputs<AgentgovRouter>

describe("the typed tRPC client", () => {
  it("has the types of every operation's input and output", () => {
    expectTypeOf<Inputs["agents"]["create"]["name"]>().toEqualTypeOf<string>()
    expectTypeOf<Outputs["agents"]["get"]["id"]>().toEqualTypeOf<string>()
    expectTypeOf<Outputs["agents"]["list"]["meta"]["hasMore"]>().toEqualTypeOf<boolean>()
    expectTypeOf<Outputs["guard"]["evaluate"]["decision"]>().toEqualTypeOf<"allow" | "deny" | "require_approval">()
    // @ts-expect-error a procedure no operation defines
    expectTypeOf<Outputs["agents"]["nope"]>()
    // The error's data carries the REST envelope's error.
    expectTypeOf<TRPCClientError<AgentgovRouter>["data"]>().toExtend<
      { apiError: { code: string; message: string } } | null | undefined
    >()
  })

  it("calls queries and mutations with typed inputs, and gets what REST answers", async () => {
    const name = unique("typed")
    const created = await client.agents.create.mutate({ name, labels: ["typed"] })
    expect(created.name).toBe(name)
    expect(created.id).toMatch(/^agt_/)
    const rest = await t.call("GET", `/api/v1/agents/${created.id}`)
    expect(await client.agents.get.query({ id: created.id })).toEqual(rest.body.data)

    const page = await client.agents.list.query({ label: "typed", limit: 1 })
    expect(page.data.map((a) => a.id)).toEqual([created.id])
    // An operation whose fields are all optional takes no input at all.
    const workspaces = await client.workspaces.list.query()
    expect(workspaces.data.map((w) => w.id)).toContain(t.workspaceId)

    const decision = await client.guard.evaluate.mutate({ agentId: created.id, action: "files.read" })
    expect(["allow", "deny", "require_approval"]).toContain(decision.decision)
    expect(decision.eventId).toMatch(/^evt_/)

    // @ts-expect-error `name` is required
    const missing = client.agents.create.mutate({ labels: ["x"] })
    await expect(missing).rejects.toBeInstanceOf(TRPCClientError)
  })

  it("fails with the envelope's error in data.apiError", async () => {
    const failure = await client.agents.get.query({ id: "agt_missing" }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(failure).toBeInstanceOf(TRPCClientError)
    const error = failure as TRPCClientError<AgentgovRouter>
    expect(error.data?.httpStatus).toBe(404)
    expect(error.data?.apiError).toMatchObject({ code: "AGENT_NOT_FOUND" })

    const refused = await clientWith("not-a-key")
      .agents.list.query()
      .then(
        () => undefined,
        (e: unknown) => e as TRPCClientError<AgentgovRouter>,
      )
    expect(refused?.data?.httpStatus).toBe(401)
    expect(refused?.data?.apiError.code).toBe("UNAUTHORIZED")
  })

  it("holds every operation at its name's path, a query for GET and a mutation otherwise, as the type says", () => {
    const router = makeTrpcRouter(
      makeExecutor(
        t.server.runtime,
        makeLogger("error", () => {}),
      ),
    )
    const procedures = router._def.procedures as unknown as Record<string, { _def: { type: string } }>
    expect(Object.keys(procedures).sort()).toEqual(definedOperations.map((op) => op.name).sort())
    for (const op of definedOperations)
      expect(procedures[op.name]?._def.type, op.name).toBe(op.method === "GET" ? "query" : "mutation")
  })
})
