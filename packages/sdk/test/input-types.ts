/**
 * Compile-time check (`tsc --noEmit -p packages/sdk`): an agent's own `interface` types are accepted
 * where the SDK sends a JSON object (a guard context, an event's data, the context mappers).
 * TypeScript lets no interface meet an index signature such as `JsonObject`'s, so these inputs take
 * any object type.
 */

import { governTools } from "../src/ai.ts"
import type { AgentRuntime, TrackEvent } from "../src/index.ts"

interface Mail {
  to: string
  body: string
}

export const inputs = async (agent: AgentRuntime, mail: Mail) => {
  await agent.guard("email.send", mail)
  const event: TrackEvent = { type: "email.sent", data: mail }
  agent.track(event)
  agent.track({ type: "email.sent", data: mail })
  const send = agent.governed("email.send", async (m: Mail) => m.to, { context: (m) => m })
  await send(mail)
  return governTools({ send: { execute: async (m: Mail) => m.to } }, agent, {
    context: (_name, input) => input as Mail,
  })
}
