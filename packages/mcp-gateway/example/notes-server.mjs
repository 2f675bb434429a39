#!/usr/bin/env node
/**
 * A small MCP server to put behind the gateway: notes kept in memory, over stdio. Four tools:
 * `add_note`, `list_notes`, `delete_notes` (which the example's policy denies) and `show_config` (whose
 * answer carries a credential that the gateway redacts).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"

const notes = []
const server = new Server({ name: "notes", version: "1.0.0" }, { capabilities: { tools: {} } })

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "add_note",
      description: "Saves a note.",
      inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    },
    { name: "list_notes", description: "Lists the notes saved so far.", inputSchema: { type: "object" } },
    { name: "delete_notes", description: "Deletes every note.", inputSchema: { type: "object" } },
    { name: "show_config", description: "Shows the server's configuration.", inputSchema: { type: "object" } },
  ],
}))

server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
  const text = (t) => ({ content: [{ type: "text", text: t }] })
  switch (params.name) {
    case "add_note":
      notes.push(String(params.arguments?.text ?? ""))
      return text(`saved note ${notes.length}`)
    case "list_notes":
      return text(notes.map((n, i) => `${i + 1}. ${n}`).join("\n") || "no notes")
    case "delete_notes":
      notes.length = 0
      return text("deleted")
    case "show_config":
      return text("storage: memory\naws_access_key_id = AKIAIOSFODNN7EXAMPLE")
    default:
      return { isError: true, content: [{ type: "text", text: `no tool ${params.name}` }] }
  }
})

await server.connect(new StdioServerTransport())
