import { useEffect, useRef, useState } from "react"
import { noteUnauthorized } from "./api.ts"
import { getRequestWorkspace } from "./session.tsx"

export interface LiveEvent {
  readonly id: string
  readonly type: string
  readonly timestamp: string
  readonly agentId: string | null
  readonly sequence: number
  readonly data: Readonly<Record<string, unknown>>
  readonly actor: { readonly type: string; readonly id: string | null }
}

/**
 * The audit trail live (D9): `GET /api/v1/events/stream`, server-sent events, read with fetch so that the
 * request names the workspace in view (EventSource cannot send headers). Reconnects after a drop, resuming
 * after the last event seen (`Last-Event-ID`), so nothing is missed or repeated.
 */
export const useEventStream = (types: ReadonlyArray<string>, onEvent: (e: LiveEvent) => void, enabled = true) => {
  const [status, setStatus] = useState<"connecting" | "live" | "offline">("connecting")
  const handler = useRef(onEvent)
  handler.current = onEvent
  const key = types.join(",")
  useEffect(() => {
    if (!enabled) return
    const abort = new AbortController()
    let lastId: string | undefined
    let retry = 500
    const run = async () => {
      while (!abort.signal.aborted) {
        try {
          setStatus("connecting")
          const qs = new URLSearchParams()
          for (const t of key ? key.split(",") : []) qs.append("types", t)
          const workspace = getRequestWorkspace()
          const res = await fetch(`/api/v1/events/stream${qs.size ? `?${qs}` : ""}`, {
            credentials: "same-origin",
            signal: abort.signal,
            headers: {
              accept: "text/event-stream",
              ...(workspace ? { "x-agentgov-workspace": workspace } : {}),
              ...(lastId ? { "last-event-id": lastId } : {}),
            },
          })
          // 401: the session ended; the provider shows the sign-in screen (and this effect ends with the page).
          noteUnauthorized(res.status)
          if (!res.ok || !res.body) throw new Error(`stream answered ${res.status}`)
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
          let buffer = ""
          for (;;) {
            const { value, done } = await reader.read()
            if (done) break
            buffer += value
            let end = buffer.indexOf("\n\n")
            while (end >= 0) {
              const block = buffer.slice(0, end)
              buffer = buffer.slice(end + 2)
              end = buffer.indexOf("\n\n")
              let id: string | undefined
              let data = ""
              let event = "message"
              for (const line of block.split("\n")) {
                // The server says `: connected` once its subscription is on: only from then is an event recorded
                // sure to arrive, so only then is the tail "live" (the response's headers come before).
                if (line === ": connected") {
                  setStatus("live")
                  retry = 500
                } else if (line.startsWith("id:")) id = line.slice(3).trim()
                else if (line.startsWith("data:")) data += line.slice(5).trim()
                else if (line.startsWith("event:")) event = line.slice(6).trim()
              }
              if (id) lastId = id
              if (event === "message" && data) {
                try {
                  const parsed = JSON.parse(data) as { payload?: LiveEvent }
                  if (parsed.payload) handler.current(parsed.payload)
                } catch {
                  // a message we cannot read is skipped
                }
              }
            }
          }
        } catch {
          if (abort.signal.aborted) return
        }
        setStatus("offline")
        await new Promise((r) => setTimeout(r, retry))
        retry = Math.min(retry * 2, 10_000)
      }
    }
    void run()
    return () => abort.abort()
  }, [key, enabled])
  return status
}
