import type { HttpClient, RequestOptions, RequestSpec } from "../core/HttpClient.ts"
import { Page, PageIterator } from "../core/pagination.ts"

/** An id as a path segment: encoded, so that no id can reach another route. */
export const seg = (id: string): string => {
  if (typeof id !== "string" || id === "") throw new TypeError(`expected an id, got ${JSON.stringify(id)}`)
  return encodeURIComponent(id)
}

/** What the resources share: the transport, and the helpers for one record and for lists. */
export abstract class Resource {
  protected readonly http: HttpClient

  constructor(http: HttpClient) {
    this.http = http
  }

  protected async one<T>(spec: RequestSpec, options?: RequestOptions): Promise<T> {
    return (await this.http.request<T>(spec, options)).data
  }

  protected paginate<T>(
    path: string,
    params: Readonly<Record<string, unknown>> & { readonly cursor?: string | undefined },
    options?: RequestOptions,
  ): PageIterator<T> {
    const { cursor, ...query } = params
    const fetchPage = async (at: string | undefined): Promise<Page<T>> => {
      const result = await this.http.request<ReadonlyArray<T>>(
        { method: "GET", path, query: { ...query, cursor: at } },
        options,
      )
      return new Page(result.data, result.meta, fetchPage)
    }
    return new PageIterator(fetchPage, cursor)
  }
}
