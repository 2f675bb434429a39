import { createServer, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { invitationMailer } from "../src/domainSettings.ts"

/**
 * The invitation mailer against SMTP servers that take a connection and then stall (a real TCP server). Before, such
 * a server held the invitation's request for nodemailer's defaults: 30 s for the greeting, 10 min on a silent socket.
 */
describe("the invitation mailer", () => {
  const sockets = new Set<Socket>()
  let silent: ReturnType<typeof createServer>
  let greetsThenStalls: ReturnType<typeof createServer>
  const portOf = (s: ReturnType<typeof createServer>) => (s.address() as { port: number }).port
  const listen = (s: ReturnType<typeof createServer>) =>
    new Promise<void>((resolve) => s.listen(0, "127.0.0.1", () => resolve()))

  beforeAll(async () => {
    silent = createServer((socket) => sockets.add(socket))
    greetsThenStalls = createServer((socket) => {
      sockets.add(socket)
      socket.write("220 mail.example ESMTP\r\n")
    })
    await Promise.all([listen(silent), listen(greetsThenStalls)])
  })
  afterAll(async () => {
    for (const s of sockets) s.destroy()
    await Promise.all([silent, greetsThenStalls].map((s) => new Promise((r) => s.close(r))))
  })

  const invite = { to: "grace@example.com", workspaceName: "acme", role: "member", link: "http://x/#invitation=t" }

  it("gives up on a server that accepts and never greets, within its time-out, so the invitation falls back to its link", async () => {
    const send = invitationMailer(`smtp://127.0.0.1:${portOf(silent)}`, undefined, 300)!
    await expect(send(invite)).rejects.toThrow(/ETIMEDOUT|timed out/)
  })

  it("gives up on a server that greets and then goes silent", async () => {
    const send = invitationMailer(`smtp://127.0.0.1:${portOf(greetsThenStalls)}`, undefined, 300)!
    await expect(send(invite)).rejects.toThrow(/ETIMEDOUT|timed out/)
  })
})
