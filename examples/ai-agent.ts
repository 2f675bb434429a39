/**
 * A Vercel AI SDK agent whose tools are governed by agentgov (`@agentgov/sdk/ai`). To run it
 * without an LLM provider, the model is scripted (`MockLanguageModelV4` from `ai/test`): it asks
 * for two tool calls, one the policy allows and one it denies. Swap in a real model
 * (e.g. `openai("gpt-4o")` from `@ai-sdk/openai`) and nothing else changes.
 *
 *   AGENTGOV_URL=http://127.0.0.1:3000 AGENTGOV_API_KEY=svc_ws_… npm run ai-agent
 */
import { AgentGov } from "@agentgov/sdk"
import { governTools } from "@agentgov/sdk/ai"
import { generateText, stepCountIs, tool } from "ai"
import { MockLanguageModelV4 } from "ai/test"
import { z } from "zod"

const apiKey = process.env.AGENTGOV_API_KEY
const baseUrl = process.env.AGENTGOV_URL ?? "http://127.0.0.1:3000"
if (!apiKey) {
  console.error("Set AGENTGOV_API_KEY to a workspace key (`npm start` prints one on its first start).")
  process.exit(1)
}
const agentgov = new AgentGov({ apiKey, baseUrl })

// Set-up: the agent, and a policy that keeps it from deleting files.
const [existing] = await agentgov.agents.list({ namePrefix: "example-ai-assistant", limit: 1 }).toArray(1)
const bot = existing ?? (await agentgov.agents.create({ name: "example-ai-assistant" }))
const POLICY_NAME = "example: no deletes"
const policies = await agentgov.policies.list({ limit: 100 }).toArray()
if (!policies.some((p) => p.name === POLICY_NAME)) {
  await agentgov.policies.create({
    name: POLICY_NAME,
    rules: [{ id: "no-delete", effect: "deny", actions: ["deleteFiles"], reason: "deleting files needs a human" }],
  })
}

const agent = agentgov.agent({ agentId: bot.id })

const tools = governTools(
  {
    sendEmail: tool({
      description: "Send an e-mail",
      inputSchema: z.object({ to: z.string(), subject: z.string() }),
      execute: async ({ to, subject }) => ({ sent: true, to, subject }),
    }),
    deleteFiles: tool({
      description: "Delete files under a path",
      inputSchema: z.object({ path: z.string() }),
      execute: async ({ path }) => ({ deleted: path }),
    }),
  },
  agent,
  // The model sees the refusal as the tool's result and can tell the user.
  { onDenied: (denied) => ({ refused: denied.decision.reasons[0]?.message }) },
)

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 10, text: 10, reasoning: undefined },
}
const model = new MockLanguageModelV4({
  doGenerate: [
    {
      content: [
        {
          type: "tool-call",
          toolCallId: "c1",
          toolName: "sendEmail",
          input: '{"to":"team@example.com","subject":"Q3"}',
        },
        { type: "tool-call", toolCallId: "c2", toolName: "deleteFiles", input: '{"path":"/srv/reports"}' },
      ],
      finishReason: { unified: "tool-calls", raw: undefined },
      usage,
      warnings: [],
    },
    {
      content: [{ type: "text", text: "I sent the e-mail; deleting the reports needs a human." }],
      finishReason: { unified: "stop", raw: undefined },
      usage,
      warnings: [],
    },
  ],
})

const result = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Send the Q3 mail and clean up" })
for (const r of result.steps[0]?.toolResults ?? []) console.log(`${r.toolName}:`, JSON.stringify(r.output))
console.log(`model: ${result.text}`)
await agent.shutdown()
process.exit(0)
