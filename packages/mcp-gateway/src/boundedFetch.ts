/**
 * The most a message from an MCP server over HTTP may take: the MCP SDK's bound on one stdio line (10 MiB), so
 * a server is held to the same size whichever transport it speaks.
 */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024

/**
 * A fetch for the Streamable HTTP client whose answers cannot hold more than `max` bytes per message: a JSON
 * answer as a whole, an event stream per event (it may stay open for the session, so only each event is bounded).
 * Past it the body fails with an error naming the bound, instead of the gateway reading a server's answer without
 * end (the SDK reads a JSON answer whole, and an event whole, into memory). Redirects and bodiless answers pass.
 */
export const boundedFetch =
  (inner: typeof fetch = fetch, max: number = MAX_MESSAGE_BYTES): typeof fetch =>
  async (input, init) => {
    const response = await inner(input, init)
    if (response.body === null || response.status < 200 || response.status >= 300 || response.status === 204)
      return response
    const stream = /^text\/event-stream\b/i.test(response.headers.get("content-type") ?? "")
    let size = 0
    let line = 0
    const bounded = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          if (stream) {
            // An event ends at an empty line; CR before LF is not counted as the line's.
            for (const byte of chunk) {
              if (byte === 10) {
                if (line === 0) size = 0
                line = 0
              } else if (byte !== 13) {
                line++
                if (++size > max) break
              }
            }
          } else size += chunk.byteLength
          if (size > max)
            controller.error(
              new Error(
                `the MCP server sent a message over ${max} bytes (${Math.round(max / 1048576)} MiB); it was not read`,
              ),
            )
          else controller.enqueue(chunk)
        },
      }),
    )
    return new Response(bounded, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    })
  }
