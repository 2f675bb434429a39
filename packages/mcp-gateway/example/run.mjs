#!/usr/bin/env node
/**
 * The example, end to end: an MCP client (the MCP SDK's, as Claude Desktop or Cursor would be) starts
 * `agentgov-mcp-gateway -- node notes-server.mjs` and uses the notes server through it.
 *
 *   AGENTGOV_URL=http://localhost:3000 AGENTGOV_API_KEY=svc_ag_sk_… node run.mjs
 *
 * With a policy that denies `mcp.notes.delete_notes` to the agent, `delete_notes` is not listed and its call is
 * refused; `show_config`'s credential arrives redacted. Exits 1 when something is not as described.
 */
import { fileURLToPath } from "node:url"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"

if (!process.env.AGENTGOV_URL || !process.env.AGENTGOV_API_KEY) {
  console.error("set AGENTGOV_URL and AGENTGOV_API_KEY (an agent key) first")
  process.exit(2)
}
const gateway = fileURLToPath(new URL("../bin/agentgov-mcp-gateway.js", import.meta.url))
const notesServer = fileURLToPath(new URL("notes-server.mjs", import.meta.url))

const client = new Client({ name: "notes-example", version: "1.0.0" })
await client.connect(
  new StdioClientTransport({
    command: process.execPath,
    // What a client's configuration says: the gateway, then `--`, then the server's own command.
    args: [gateway, "--", process.execPath, notesServer],
    env: { ...process.env, AGENTGOV_MCP_SERVER: process.env.AGENTGOV_MCP_SERVER ?? "notes" },
  }),
)
let ok = true
try {
  const { tools } = await client.listTools()
  console.log("tools:", tools.map((t) => t.name).join(", "))
  const added = await client.callTool({ name: "add_note", arguments: { text: "buy milk" } })
  console.log("add_note →", added.content[0].text)
  const config = await client.callTool({ name: "show_config", arguments: {} })
  console.log("show_config →", JSON.stringify(config.content[0].text))
  if (config.content[0].text.includes("AKIA")) {
    console.error("the credential was not redacted")
    ok = false
  }
  try {
    await client.callTool({ name: "delete_notes", arguments: {} })
    console.log("delete_notes → allowed (no policy denies mcp.notes.delete_notes to this agent)")
  } catch (error) {
    console.log(`delete_notes → refused (${error.code}): ${error.message}`)
  }
} finally {
  await client.close()
}
process.exit(ok ? 0 : 1)
