import { existsSync } from "node:fs"
import { NOT_VERIFIED_SVG, renderBadgeSvg, TIER_COLOURS } from "@agentgov/domain"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/**
 * The badge's SVG as a browser draws it (D13: a readable flat badge, one colour per tier, safe
 * against injection): in a real headless Chromium, embedded as an image and inlined in a page.
 * Skipped where no Chromium is installed (`apt-get install chromium`).
 */

const CHROMIUM = "/usr/bin/chromium"
const SIG = "eyJhbGciOiJFZERTQSJ9.eyJ4IjoxfQ.c2ln"

let browser: Browser
let page: Page
const dialogs: Array<string> = []

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) return
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
  page = await browser.newPage()
  page.on("dialog", (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
}, 60_000)
afterAll(async () => browser?.close())

const hex = (rgb: readonly [number, number, number]) => `#${rgb.map((c) => c.toString(16).padStart(2, "0")).join("")}`

/** The colour of a pixel of a screenshot of `selector`, at (x, y) in CSS pixels. */
const pixel = async (selector: string, x: number, y: number): Promise<readonly [number, number, number]> => {
  const png = await page.locator(selector).screenshot()
  return page.evaluate(
    async ({ data, x, y }) => {
      // Runs in the page (this package's types have no DOM).
      const { Image, document } = globalThis as any
      const img = new Image()
      img.src = `data:image/png;base64,${data}`
      await img.decode()
      const canvas = document.createElement("canvas")
      canvas.width = img.width
      canvas.height = img.height
      const ctx = canvas.getContext("2d")!
      ctx.drawImage(img, 0, 0)
      const [r, g, b] = ctx.getImageData(x, y, 1, 1).data
      return [r, g, b] as const
    },
    { data: png.toString("base64"), x, y },
  )
}

const close = (a: readonly number[], b: readonly number[], tolerance: number) =>
  a.every((v, i) => Math.abs(v - b[i]!) <= tolerance)

const parse = (colour: string) => [1, 3, 5].map((i) => Number.parseInt(colour.slice(i, i + 2), 16))

describe.skipIf(!existsSync(CHROMIUM))("the badge in Chromium", () => {
  it("draws each tier in its colour, as an image and inlined side by side, and runs nothing a name carries", async () => {
    const hostile = [
      `<script>alert("script")</script>`,
      `"><img src=x onerror=alert('img')>`,
      `</text><foreignObject><body onload=alert('fo')/></foreignObject>`,
    ]
    const badges = [
      renderBadgeSvg({ agentName: "billing-bot", tier: "bronze", score: 550, signature: SIG }),
      renderBadgeSvg({ agentName: "research-agent", tier: "silver", score: 742, signature: SIG }),
      renderBadgeSvg({ agentName: hostile[0]!, tier: "gold", score: 901, signature: SIG }),
      renderBadgeSvg({ agentName: hostile[1]!, tier: "platinum", score: 978, signature: SIG }),
      renderBadgeSvg({ agentName: hostile[2]!, tier: "bronze", score: 512, signature: SIG }),
      NOT_VERIFIED_SVG,
    ]
    const html = badges
      .map(
        (svg, i) =>
          `<div><img id="img${i}" src="data:image/svg+xml;base64,${Buffer.from(svg).toString("base64")}"></div>` +
          `<div id="inline${i}" style="display:inline-block">${svg}</div>`,
      )
      .join("")
    await page.setContent(`<!doctype html><html><body style="margin:0;background:#fff">${html}</body></html>`)
    await page.waitForFunction(() =>
      [...(globalThis as any).document.images].every((i: any) => i.complete && i.naturalWidth > 0),
    )
    expect(dialogs).toEqual([])
    const injected = await page.evaluate(
      () => (globalThis as any).document.querySelectorAll("script, foreignObject, img[onerror]").length,
    )
    expect(injected).toBe(0)

    const tiers = ["bronze", "silver", "gold", "platinum", "bronze"] as const
    for (const [i, tier] of tiers.entries()) {
      const width = Number(/width="(\d+)"/.exec(badges[i]!)![1])
      for (const selector of [`#img${i}`, `#inline${i} svg`]) {
        const box = (await page.locator(selector).boundingBox())!
        expect(Math.round(box.width), selector).toBe(width)
        // The right end of the badge (the message) is the tier's colour, under the badge's faint gradient;
        // inlined badges each keep their own clip path, so none is cut to another's width.
        const rgb = await pixel(selector, width - 4, 10)
        expect(close(rgb, parse(TIER_COLOURS[tier]), 24), `${selector}: ${hex(rgb)} vs ${TIER_COLOURS[tier]}`).toBe(
          true,
        )
      }
    }
    // The escaped name is shown as text, as written.
    expect(await page.locator("#inline2 svg text").first().textContent()).toBe(hostile[0])
  }, 60_000)
})
