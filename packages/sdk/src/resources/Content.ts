import type { RequestOptions } from "../core/HttpClient.ts"
import type { PageIterator } from "../core/pagination.ts"
import type {
  ContentItem,
  ContentListParams,
  ContentRegisterParams,
  ContentScanParams,
  ContentScanResult,
  ListParams,
  Takedown,
  TakedownCreateParams,
  WatermarkDetection,
} from "../types.ts"
import { Resource, seg } from "./Resource.ts"

/**
 * `/content/:id/takedowns` (D15).
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const notice = await client.content.takedowns.create("cnt_…", { targetUrl: "https://copy.example/x", recipient: "abuse@copy.example" })
 * ```
 */
export class Takedowns extends Resource {
  /** Recorded `pending`, then sent by SMTP when the server has SMTP_URL (`sent`, or `failed` with the reason). */
  create(contentId: string, params: TakedownCreateParams, options?: RequestOptions): Promise<Takedown> {
    return this.one({ method: "POST", path: `/content/${seg(contentId)}/takedowns`, body: params }, options)
  }

  /** Newest first, a page at a time (`for await` reads them all). */
  list(contentId: string, params: ListParams = {}, options?: RequestOptions): PageIterator<Takedown> {
    return this.paginate(`/content/${seg(contentId)}/takedowns`, { ...params }, options)
  }
}

/**
 * `/content` (D15): register texts and images, scan candidates for copies, read watermarks.
 *
 * @example
 * ```ts
 * import { readFile } from "node:fs/promises"
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * const item = await client.content.register({ kind: "image", title: "Hero", data: (await readFile("hero.png")).toString("base64"), watermark: true })
 * const { matches } = await client.content.scan({ data: (await readFile("found.jpg")).toString("base64") })
 * ```
 */
export class Content extends Resource {
  readonly takedowns = new Takedowns(this.http)

  /** Registers a text or an image; emits `content.registered`. */
  register(params: ContentRegisterParams, options?: RequestOptions): Promise<ContentItem> {
    return this.one({ method: "POST", path: "/content", body: params }, options)
  }

  /** Newest first, without match histories. */
  list(params: ContentListParams = {}, options?: RequestOptions): PageIterator<ContentItem> {
    return this.paginate("/content", { ...params }, options)
  }

  /** The record with its match history. */
  get(id: string, options?: RequestOptions): Promise<ContentItem> {
    return this.one({ method: "GET", path: `/content/${seg(id)}` }, options)
  }

  /** The protected asset's bytes and media type (the time-out covers the response's headers). */
  async asset(
    id: string,
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<{ contentType: string; data: Uint8Array }> {
    const response = await this.http.stream(
      { path: `/content/${seg(id)}/asset` },
      { accept: "*/*" },
      options.signal ?? new AbortController().signal,
    )
    return {
      contentType: response.headers.get("content-type") ?? "application/octet-stream",
      data: new Uint8Array(await response.arrayBuffer()),
    }
  }

  /** Scans a candidate against every item of the workspace, or against `contentId` alone. */
  scan(
    params: ContentScanParams & { readonly contentId?: string },
    options?: RequestOptions,
  ): Promise<ContentScanResult> {
    const { contentId, ...body } = params
    const path = contentId === undefined ? "/content/scan" : `/content/${seg(contentId)}/scan`
    return this.one({ method: "POST", path, body }, options)
  }

  /** `scan` against one item: the catalog's `content.scanItem` (`POST /content/:id/scan`). */
  scanItem(contentId: string, params: ContentScanParams, options?: RequestOptions): Promise<ContentScanResult> {
    return this.scan({ ...params, contentId }, options)
  }

  /** The catalog's `content.watermark.detect`, by its name: `detectWatermark` with the request's body. */
  readonly watermark = {
    detect: (params: { readonly data: string }, options?: RequestOptions): Promise<WatermarkDetection> =>
      this.detectWatermark(params.data, options),
  }

  /** Reads the content id an image's watermark carries. */
  detectWatermark(data: string, options?: RequestOptions): Promise<WatermarkDetection> {
    return this.one({ method: "POST", path: "/content/watermark/detect", body: { data } }, options)
  }
}
