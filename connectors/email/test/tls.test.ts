import { mkdtempSync, rmSync } from "node:fs"
import { networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { sampleEvent, signDelivery } from "@agentgov/connector-sdk/testing"
import { type InProcess, newSecret, runCommand, runInProcess, waitFor } from "@agentgov/connector-testing"
import { afterAll, describe, expect, it } from "vitest"
import { createEmailConnector } from "../src/connector.ts"
import { smtpTransport, smtpUrlProblem } from "../src/smtp.ts"
import { type SmtpServer, type SmtpServerOptions, startSmtpServer } from "./smtpServer.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-email.js", import.meta.url))

/** This machine's address on a network, not a loopback one: where STARTTLS must be required. */
const networkAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a !== undefined && a.family === "IPv4" && !a.internal)?.address

/** smtp-server's own certificate is self-signed for localhost: the tests' URLs accept it. */
const TEST_CERT = "tls.rejectUnauthorized=false"

describe("email: how SMTP_URL protects the connection, against a real SMTP server", () => {
  const dirs: Array<string> = []
  const started: Array<InProcess> = []
  const servers: Array<SmtpServer> = []
  afterAll(async () => {
    for (const c of started) await c.running.close()
    for (const s of servers) await s.close()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  const secret = newSecret()
  const server = async (options: SmtpServerOptions) => {
    const s = await startSmtpServer(options)
    servers.push(s)
    return s
  }
  /** A connector sending each event at once to `smtpUrl`, and one event sent to it. */
  const sendOne = async (smtpUrl: string) => {
    const dir = mkdtempSync(join(tmpdir(), "agentgov-email-tls-"))
    dirs.push(dir)
    const c = await runInProcess(createEmailConnector({ pollMs: 10 }), {
      SMTP_URL: smtpUrl,
      EMAIL_FROM: "agentgov@example.com",
      EMAIL_TO: "ops@example.com",
      EMAIL_FREQUENCY: "immediate",
      AGENTGOV_WEBHOOK_SECRET: secret,
      AGENTGOV_CONNECTOR_DATA_DIR: dir,
    })
    started.push(c)
    const { body, headers } = signDelivery({ secret, envelope: sampleEvent("digest.probe", { data: { n: 1 } }) })
    expect((await fetch(`${c.url}/webhooks`, { method: "POST", headers, body })).status).toBe(200)
    return c
  }
  const login = (url: string) => url.replace(/^(smtps?:\/\/)/, "$1agentgov%40example.com:app-password@")
  const uncheckedCertificate = /tls\.rejectUnauthorized=false: the server's certificate is not checked/
  const failedAttempt = (c: InProcess) => c.logs().find((l) => l.msg === "sending the digest failed; will retry")

  it.skipIf(networkAddress === undefined)(
    "smtp:// to a host that is not a loopback one requires STARTTLS: nothing, not even the login, goes in the clear",
    async () => {
      const plain = await server({ host: networkAddress })
      const c = await sendOne(login(plain.url))
      await waitFor(() => failedAttempt(c) !== undefined, "the refused attempt")
      expect(failedAttempt(c)!.error).toMatch(/STARTTLS/i)
      expect(plain.mailbox).toEqual([])
    },
  )

  it.skipIf(networkAddress === undefined)(
    "smtp:// to a host that is not a loopback one sends over STARTTLS when the server offers it",
    async () => {
      const offering = await server({ host: networkAddress, starttls: true })
      const c = await sendOne(`${login(offering.url)}?${TEST_CERT}`)
      await waitFor(() => offering.mailbox.length === 1, "the digest")
      expect(offering.mailbox[0]).toMatchObject({ secure: true, authenticated: true })
      // This server's certificate is self-signed, so the URL turns the check off: said at start, for a host off this
      // machine.
      expect(c.logs().some((l) => l.level === "warn" && uncheckedCertificate.test(String(l.msg)))).toBe(true)
    },
  )

  it.skipIf(networkAddress === undefined)(
    "requireTLS=false in the URL is the explicit way to send in the clear there, and the app warns of it",
    async () => {
      const plain = await server({ host: networkAddress })
      const c = await sendOne(`${plain.url}?requireTLS=false`)
      await waitFor(() => plain.mailbox.length === 1, "the digest")
      expect(plain.mailbox[0]!.secure).toBe(false)
      expect(c.logs().some((l) => l.level === "warn" && /requireTLS=false/.test(String(l.msg)))).toBe(true)
    },
  )

  it.skipIf(networkAddress === undefined)(
    "ignoreTLS=true or opportunisticTLS=true in the URL does not undo the STARTTLS required there",
    async () => {
      // The connector's nodemailer lets requireTLS, which the app sets for this host, take precedence over both (an
      // older one let ignoreTLS send the login in the clear): checked against a server, for an upgrade that changes it.
      for (const option of ["ignoreTLS=true", "opportunisticTLS=true"]) {
        const offering = await server({ host: networkAddress, starttls: true })
        await sendOne(`${login(offering.url)}?${option}&${TEST_CERT}`)
        await waitFor(() => offering.mailbox.length === 1, `the digest with ${option}`)
        expect(offering.mailbox[0], option).toMatchObject({ secure: true, authenticated: true })
      }
    },
  )

  it("smtp:// to a loopback host (a local relay) uses STARTTLS only when offered", async () => {
    const plain = await server({})
    await sendOne(plain.url)
    await waitFor(() => plain.mailbox.length === 1, "the digest")
    expect(plain.mailbox[0]!.secure).toBe(false)
    const offering = await server({ starttls: true })
    const c = await sendOne(`${offering.url}?${TEST_CERT}`)
    await waitFor(() => offering.mailbox.length === 1, "the digest")
    expect(offering.mailbox[0]!.secure).toBe(true)
    // no path to pose on: no warning for the certificate a local relay shows
    expect(c.logs().some((l) => uncheckedCertificate.test(String(l.msg)))).toBe(false)
  })

  it("smtps:// is TLS from the first byte (as on 465), and never falls back to a plain conversation", async () => {
    const implicit = await server({ implicitTls: true })
    expect(implicit.url).toMatch(/^smtps:\/\//)
    await sendOne(`${login(implicit.url)}?${TEST_CERT}`)
    await waitFor(() => implicit.mailbox.length === 1, "the digest")
    expect(implicit.mailbox[0]).toMatchObject({ secure: true, authenticated: true })
    // smtps:// to a server that speaks plain SMTP: the TLS handshake fails, nothing is sent
    const plain = await server({})
    const c = await sendOne(`${plain.url.replace("smtp://", "smtps://")}?${TEST_CERT}`)
    await waitFor(() => failedAttempt(c) !== undefined, "the failed attempt")
    expect(plain.mailbox).toEqual([])
  })

  it("reads the URL as nodemailer does: the scheme chooses, the host decides whether STARTTLS is required", () => {
    expect(smtpTransport("smtps://u:p@mail.example.com").tls).toBe("implicit")
    expect(smtpTransport("smtps://u:p@mail.example.com?secure=false").options.secure).toBe(true)
    expect(smtpTransport("smtp://u:p@mail.example.com:587").options).toMatchObject({ secure: false, requireTLS: true })
    // ignoreTLS does not undo it: requireTLS wins in nodemailer; only requireTLS=false does
    expect(smtpTransport("smtp://mail.example.com?ignoreTLS=true").options.requireTLS).toBe(true)
    expect(smtpTransport("smtp://mail.example.com?requireTLS=false")).toMatchObject({
      tls: "starttls-if-offered",
      loopback: false,
    })
    for (const local of ["smtp://127.0.0.1:25", "smtp://localhost:2525", "smtp://[::1]:25", "smtp://127.3.4.5"])
      expect(smtpTransport(local), local).toMatchObject({ tls: "starttls-if-offered", loopback: true })
    expect(smtpTransport("smtp://u:p@mail.example.com:587").checksCertificate).toBe(true)
    expect(smtpTransport("smtps://u:p@mail.example.com?tls.rejectUnauthorized=false").checksCertificate).toBe(false)
    expect(smtpTransport("smtp://u:p@mail.example.com:587?tls.rejectUnauthorized=false").checksCertificate).toBe(false)
    // Node checks the certificate unless the option is `false` itself
    expect(smtpTransport("smtp://mail.example.com?tls.rejectUnauthorized=0").checksCertificate).toBe(true)
    // a name that only starts like a loopback one is no loopback host
    expect(smtpTransport("smtp://127.0.0.1.mail.example.com").tls).toBe("starttls")
    expect(smtpTransport("smtp://localhost.mail.example.com").tls).toBe("starttls")
  })

  it("refuses smtp:// on port 465 (implicit TLS there) at start: exit 2, naming it, never echoing the URL", async () => {
    expect(smtpUrlProblem("smtp://u:p@mail.example.com:465")).toMatch(/write smtps:\/\/…:465/)
    expect(smtpUrlProblem("smtps://u:p@mail.example.com:465")).toBeUndefined()
    expect(smtpUrlProblem("smtp://u:p@mail.example.com:587")).toBeUndefined()
    const dir = mkdtempSync(join(tmpdir(), "agentgov-email-tls-"))
    dirs.push(dir)
    const r = await runCommand(bin, ["check"], {
      SMTP_URL: "smtp://agentgov:s3cretpass@mail.example.com:465",
      EMAIL_FROM: "agentgov@example.com",
      EMAIL_TO: "ops@example.com",
      AGENTGOV_WEBHOOK_SECRET: secret,
      AGENTGOV_CONNECTOR_DATA_DIR: dir,
    })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("SMTP_URL is smtp:// on port 465")
    expect(r.stderr).not.toContain("s3cretpass")
  })
})
