/**
 * A billing agent governed by agentgov: every payment is guarded by a policy, big ones wait for
 * an operator's approval, and everything lands in the audit trail.
 *
 *   AGENTGOV_URL=http://127.0.0.1:3000 AGENTGOV_API_KEY=svc_ws_… npm run agent
 *
 * With `--manual`, you approve the big payment yourself (the command is printed); otherwise a
 * simulated operator approves it after a moment.
 */
import { ActionDenied, AgentGov } from "@agentgov/sdk"

const apiKey = process.env.AGENTGOV_API_KEY
const baseUrl = process.env.AGENTGOV_URL ?? "http://127.0.0.1:3000"
if (!apiKey) {
  console.error("Set AGENTGOV_API_KEY to a workspace key (`npm start` prints one on its first start).")
  process.exit(1)
}
const manual = process.argv.includes("--manual")
const agentgov = new AgentGov({ apiKey, baseUrl })

// --- Set-up, as an operator would do it once: the agent and its policy -----------------------

const AGENT_NAME = "example-billing-bot"
const POLICY_NAME = "example: payments"
const [existing] = await agentgov.agents.list({ namePrefix: AGENT_NAME, limit: 1 }).toArray(1)
const bot = existing ?? (await agentgov.agents.create({ name: AGENT_NAME, labels: ["example", "finance"] }))
let policy = (await agentgov.policies.list({ limit: 100 }).toArray()).find((p) => p.name === POLICY_NAME)
policy ??= await agentgov.policies.create({
  name: POLICY_NAME,
  rules: [
    {
      id: "no-crypto",
      effect: "deny",
      actions: ["payment.send"],
      when: { field: "context.currency", op: "eq", value: "BTC" },
      reason: "we do not pay in crypto",
    },
    {
      id: "big-payments",
      effect: "require_approval",
      actions: ["payment.send"],
      when: { field: "context.amount", op: "gt", value: 1000 },
      reason: "payments over 1,000 need a human",
      approval: { timeoutSeconds: 600 },
    },
  ],
})
console.log(`agent ${bot.id} (${bot.name}), policy ${policy.id} v${policy.version}\n`)

// --- The operator, in the background: approves what the agent asks for ---------------------

const operator = new AbortController()
void (async () => {
  const announced = new Set<string>()
  while (!operator.signal.aborted) {
    for await (const approval of agentgov.approvals.list({ agentId: bot.id })) {
      if (announced.has(approval.id)) continue
      announced.add(approval.id)
      if (manual) {
        console.log(`  approval ${approval.id} is waiting. Approve it with:\n`)
        console.log(`    curl -s -X POST ${baseUrl}/api/v1/approvals/${approval.id}/decide \\`)
        console.log(`      -H "Authorization: Bearer $AGENTGOV_API_KEY" -H "Content-Type: application/json" \\`)
        console.log(`      -d '{"decision":"approved"}'\n`)
      } else {
        await new Promise((r) => setTimeout(r, 1_000))
        await agentgov.approvals.decide(approval.id, { decision: "approved", reason: "simulated operator" })
        console.log(`  (operator approved ${approval.id})`)
      }
    }
    await new Promise((r) => setTimeout(r, 500))
  }
})()

// --- The agent --------------------------------------------------------------------------------

const agent = agentgov.agent({ agentId: bot.id }) // an agent key would imply the agent

interface Payment {
  readonly to: string
  readonly amount: number
  readonly currency: string
}

const sendPayment = agent.governed("payment.send", async (payment: Payment) => {
  // The real work would happen here; it runs only when the guard allows it.
  return { reference: `pay_${Math.random().toString(36).slice(2, 10)}`, ...payment }
})

const payments: ReadonlyArray<Payment> = [
  { to: "acme-office-supplies", amount: 120, currency: "EUR" },
  { to: "anonymous-wallet", amount: 50, currency: "BTC" },
  { to: "datacenter-lease", amount: 4_800, currency: "EUR" },
]
for (const payment of payments) {
  console.log(`payment of ${payment.amount} ${payment.currency} to ${payment.to}`)
  try {
    const done = await sendPayment(payment)
    console.log(`  sent: ${done.reference}\n`)
  } catch (error) {
    if (!(error instanceof ActionDenied)) throw error
    console.log(`  refused: ${error.decision.reasons[0]?.message ?? error.message}\n`)
  }
}

agent.track({ type: "billing.run_finished", data: { payments: payments.length } })
const stats = await agent.shutdown()
operator.abort()
console.log(`events sent: ${stats.sent}, dropped: ${stats.dropped}\n`)

// --- What the audit trail recorded ------------------------------------------------------------

console.log("the agent's latest events in the audit trail (newest first):")
const { data: latest } = await agentgov.events.list({ agentId: bot.id, limit: 12 }).page()
for (const event of latest) {
  const summary = event.data.decision ?? event.data.outcome ?? ""
  console.log(`  #${event.sequence} ${event.type} ${event.data.action ?? ""} ${summary}`.trimEnd())
}
const verification = await agentgov.events.verify()
console.log(`\nchain verified: ${verification.valid} (${verification.checked} events)`)
process.exit(0)
