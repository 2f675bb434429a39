import type { PageMeta } from "./HttpClient.ts"

/**
 * One page of a list: newest first; `cursor` continues after its last item.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * let page = await client.agents.list({ limit: 50 }).page()
 * while (true) {
 *   for (const agent of page.data) console.log(agent.name)
 *   const next = await page.nextPage()
 *   if (!next) break
 *   page = next
 * }
 * ```
 */
export class Page<T> {
  readonly data: ReadonlyArray<T>
  readonly hasMore: boolean
  /** Pass as `cursor` to continue after this page (also from another process); null on the last page. */
  readonly cursor: string | null
  private readonly fetchNext: (cursor: string) => Promise<Page<T>>

  constructor(data: ReadonlyArray<T>, meta: PageMeta | undefined, fetchNext: (cursor: string) => Promise<Page<T>>) {
    this.data = data
    this.hasMore = meta?.hasMore ?? false
    this.cursor = meta?.cursor ?? null
    this.fetchNext = fetchNext
  }

  /** The page after this one, or null when this is the last. */
  nextPage(): Promise<Page<T> | null> {
    return this.hasMore && this.cursor !== null ? this.fetchNext(this.cursor) : Promise.resolve(null)
  }
}

/**
 * What every `list()` returns: iterate it with `for await` to walk every item across pages
 * (fetched one page at a time, as you go), or take one page with `page()`.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const client = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 * for await (const agent of client.agents.list({ label: "finance" })) {
 *   console.log(agent.id, agent.name)
 * }
 * const first = await client.agents.list({ limit: 10 }).page()
 * console.log(first.data.length, first.hasMore)
 * ```
 */
export class PageIterator<T> implements AsyncIterable<T> {
  private readonly fetchPage: (cursor: string | undefined) => Promise<Page<T>>
  private readonly startCursor: string | undefined

  constructor(fetchPage: (cursor: string | undefined) => Promise<Page<T>>, startCursor: string | undefined) {
    this.fetchPage = fetchPage
    this.startCursor = startCursor
  }

  /** The first page (the one at `cursor`, when the list was called with one). */
  page(): Promise<Page<T>> {
    return this.fetchPage(this.startCursor)
  }

  /** Every page in turn. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let page: Page<T> | null = await this.page()
    while (page) {
      yield page
      page = await page.nextPage()
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data
  }

  /** Every item in one array, at most `max` (default 10,000) so that a large list cannot exhaust memory. */
  async toArray(max = 10_000): Promise<Array<T>> {
    const out: Array<T> = []
    if (max <= 0) return out
    for await (const item of this) {
      out.push(item)
      if (out.length >= max) break
    }
    return out
  }
}
