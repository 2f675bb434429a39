import { generateText, stepCountIs, tool } from "ai"
import { MockLanguageModelV4 } from "ai/test"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { governTools } from "../src/ai.ts"
import { ActionDenied, type AgentGov } from "../src/index.ts"
import { clientFor, startTestServer, type TestServer, unique } from "./helpers.ts"

/**
 * The Vercel AI SDK adapter, driven by the AI SDK itself (`generateText` with a scripted model
 * that asks for tool calls) against a real server's guard.
 */

let t: TestServer
let admin: AgentGov

beforeAll(async () => {
  t = await startTestServer()
  admin = clientFor(t.url, t.key)
})
afterAll(() => t.close())

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
}

/** A model that calls the given tools in its first step and then answers "done". */
const scriptedModel = (calls: ReadonlyArray<{ toolName: string; input: unknown }>) =>
  new MockLanguageModelV4({
    doGenerate: [
      {
        content: calls.map((c, i) => ({
          type: "tool-call" as const,
          toolCallId: `call_${i}`,
          toolName: c.toolName,
          input: JSON.stringify(c.input),
        })),
        finishReason: { unified: "tool-calls", raw: undefined },
        usage,
        warnings: [],
      },
      {
        content: [{ type: "text", text: "done" }],
        finishReason: { unified: "stop", raw: undefined },
        usage,
        warnings: [],
      },
    ],
  })

const setup = async () => {
  const bot = await admin.agents.create({ name: unique("ai-agent") })
  const prefix = `ai${Date.now().toString(36)}`
  await admin.policies.create({
    name: unique("ai-policy"),
    rules: [{ id: "no-delete", effect: "deny", actions: [`${prefix}_deleteFiles`], reason: "deletes need a human" }],
  })
  const sent: Array<string> = []
  const deleted: Array<string> = []
  const tools = {
    [`${prefix}_sendEmail`]: tool({
      description: "Send an e-mail",
      inputSchema: z.object({ to: z.string() }),
      execute: async ({ to }: { to: string }) => {
        sent.push(to)
        return { sent: true }
      },
    }),
    [`${prefix}_deleteFiles`]: tool({
      description: "Delete files",
      inputSchema: z.object({ path: z.string() }),
      execute: async ({ path }: { path: string }) => {
        deleted.push(path)
        return { deleted: true }
      },
    }),
  }
  return { bot, prefix, tools, sent, deleted, runtime: admin.agent({ agentId: bot.id }) }
}

describe("governTools (Vercel AI SDK)", () => {
  it("runs allowed tool calls, refuses denied ones before they run, and tracks what ran", async () => {
    const { bot, prefix, tools, sent, deleted, runtime } = await setup()
    const result = await generateText({
      model: scriptedModel([
        { toolName: `${prefix}_sendEmail`, input: { to: "cfo@example.com" } },
        { toolName: `${prefix}_deleteFiles`, input: { path: "/var/data" } },
      ]),
      tools: governTools(tools, runtime),
      stopWhen: stepCountIs(3),
      prompt: "tidy up",
    })
    expect(result.text).toBe("done")
    expect(sent).toEqual(["cfo@example.com"])
    expect(deleted).toEqual([])
    const [step] = result.steps
    const outcomes = step!.content.filter((p) => p.type === "tool-result" || p.type === "tool-error")
    expect(outcomes.map((p) => [p.type, p.toolName])).toEqual([
      ["tool-result", `${prefix}_sendEmail`],
      ["tool-error", `${prefix}_deleteFiles`],
    ])
    const refused = outcomes[1] as { error: unknown }
    expect(refused.error).toBeInstanceOf(ActionDenied)
    expect((refused.error as ActionDenied).decision.reasons[0]).toMatchObject({
      code: "POLICY_DENIED",
      message: "deletes need a human",
    })

    await runtime.flush()
    const evaluated = await admin.events.list({ type: "policy.evaluated", agentId: bot.id }).toArray()
    expect(evaluated.map((e) => e.data.action).sort()).toEqual([`${prefix}_deleteFiles`, `${prefix}_sendEmail`])
    const tracked = await admin.events.list({ type: "tool.called", agentId: bot.id }).toArray()
    expect(tracked.map((e) => [e.data.tool, e.data.outcome])).toEqual([[`${prefix}_sendEmail`, "ok"]])
    await runtime.shutdown()
  })

  it("hands the model onDenied's value instead of an error, and leaves excluded tools ungoverned", async () => {
    const { bot, prefix, tools, deleted, runtime } = await setup()
    const governed = governTools(tools, runtime, {
      onDenied: (denied) => ({ refused: denied.decision.reasons[0]?.message }),
      exclude: [`${prefix}_sendEmail`],
    })
    expect(governed[`${prefix}_sendEmail`]).toBe(tools[`${prefix}_sendEmail`])
    const result = await generateText({
      model: scriptedModel([{ toolName: `${prefix}_deleteFiles`, input: { path: "/" } }]),
      tools: governed,
      stopWhen: stepCountIs(3),
      prompt: "delete everything",
    })
    const [toolResult] = result.steps[0]!.toolResults
    expect(toolResult!.output).toEqual({ refused: "deletes need a human" })
    expect(deleted).toEqual([])
    await runtime.flush()
    expect(await admin.events.list({ type: "tool.called", agentId: bot.id }).toArray()).toEqual([])
    await runtime.shutdown()
  })

  /** A streaming tool: one output per step. */
  const progressTool = () =>
    tool({
      description: "Report progress",
      inputSchema: z.object({ steps: z.number() }),
      async *execute({ steps }: { steps: number }) {
        for (let i = 1; i <= steps; i++) yield { done: i }
      },
    })

  it("governs streaming tools: guarded before the first output, tracked after the last", async () => {
    const { bot, prefix, runtime } = await setup()
    const governed = governTools({ [`${prefix}_progress`]: progressTool() }, runtime)
    const result = await generateText({
      model: scriptedModel([{ toolName: `${prefix}_progress`, input: { steps: 3 } }]),
      tools: governed,
      stopWhen: stepCountIs(3),
      prompt: "go",
    })
    expect(result.steps[0]!.toolResults[0]!.output).toEqual({ done: 3 })
    await runtime.flush()
    const tracked = await admin.events.list({ type: "tool.called", agentId: bot.id }).toArray()
    expect(tracked.map((e) => [e.data.tool, e.data.outcome])).toEqual([[`${prefix}_progress`, "ok"]])
    await runtime.shutdown()
  })

  it("governs a tool whose plain execute returns an async iterable: its last output, tracked after it", async () => {
    const { bot, prefix, runtime } = await setup()
    async function* progress(steps: number) {
      for (let i = 1; i <= steps; i++) yield { done: i }
      if (steps > 3) throw new Error("too many steps")
    }
    const governed = governTools(
      {
        [`${prefix}_progress`]: tool({
          description: "Report progress",
          inputSchema: z.object({ steps: z.number() }),
          execute: ({ steps }: { steps: number }) => progress(steps),
        }),
      },
      runtime,
    )
    const result = await generateText({
      model: scriptedModel([{ toolName: `${prefix}_progress`, input: { steps: 3 } }]),
      tools: governed,
      stopWhen: stepCountIs(3),
      prompt: "go",
    })
    // Not the generator object (serialised as {}): the AI SDK got the iterable's last output.
    expect(result.steps[0]!.toolResults[0]!.output).toEqual({ done: 3 })
    const failing = governed[`${prefix}_progress`]!.execute!(
      { steps: 4 },
      { toolCallId: "c2", messages: [], context: {} },
    )
    await expect(Promise.resolve(failing)).rejects.toThrow("too many steps")
    await runtime.flush()
    const tracked = await admin.events.list({ type: "tool.called", agentId: bot.id }).toArray()
    expect(tracked.map((e) => [e.data.tool, e.data.outcome]).reverse()).toEqual([
      [`${prefix}_progress`, "ok"],
      [`${prefix}_progress`, "error"],
    ])
    await runtime.shutdown()
  })

  it("tracks a streaming tool its consumer stopped early: it ran, so the trail says so", async () => {
    const { bot, prefix, runtime } = await setup()
    const governed = governTools({ [`${prefix}_progress`]: progressTool() }, runtime)
    const run = governed[`${prefix}_progress`]!.execute!({ steps: 3 }, { toolCallId: "c1", messages: [], context: {} })
    const outputs = run as AsyncGenerator<unknown>
    expect((await outputs.next()).value).toEqual({ done: 1 })
    await outputs.return(undefined) // e.g. the call was aborted after its first output
    await runtime.flush()
    const tracked = await admin.events.list({ type: "tool.called", agentId: bot.id }).toArray()
    expect(tracked.map((e) => [e.data.tool, e.data.outcome])).toEqual([[`${prefix}_progress`, "error"]])
    expect(tracked[0]!.data.error).toMatchObject({ message: expect.stringContaining("stopped") })
    await runtime.shutdown()
  })
})
