import postgres from "postgres"
import { connectionOptions } from "./connectionUrl.ts"

interface Subscriber {
  readonly onMessage: (payload: string) => void
  readonly onMissed: (() => void) | undefined
}

const listenStatement = (channel: string) => `LISTEN "${channel.replace(/"/g, '""')}"`
const unlistenStatement = (channel: string) => `UNLISTEN "${channel.replace(/"/g, '""')}"`

const FIRST_RETRY_MS = 50
const LAST_RETRY_MS = 2_000

/**
 * LISTEN for a PostgreSQL pool, on one connection of its own.
 *
 * postgres.js re-subscribes after its listening connection drops, but a
 * re-subscription that fails (the server still down, a connect that times
 * out) is dropped for good, and nobody learns that notifications were missed
 * in the meantime. Caches that drop entries on notifications (revoked keys'
 * tokens, policies, agents) would then serve stale entries until they
 * expire. Here a drop tells every subscriber at once (`onMissed`), the
 * channels are subscribed again with backoff until that works, and every
 * subscriber is told again once it has: whatever it kept because no
 * notification said otherwise may be stale.
 */
export const makeNotifications = (url: string, applicationName = "agentgov-listen") => {
  const channels = new Map<string, Set<Subscriber>>()
  let drops = 0
  let resubscribing = false
  let ending = false
  /** Ends the reconnect loop's wait between tries (set while it waits). */
  let wakeLoop: (() => void) | undefined

  /** To every subscriber of the channel; one subscriber's failure is its own and keeps no other from hearing. */
  const deliver = (channel: string, payload: string) => {
    for (const s of channels.get(channel) ?? []) {
      try {
        s.onMessage(payload)
      } catch {
        // See above.
      }
    }
  }

  const missed = () => {
    for (const subscribers of channels.values())
      for (const s of subscribers) {
        try {
          s.onMissed?.()
        } catch {
          // One subscriber's failure must not keep the others stale.
        }
      }
  }

  // `onnotify` is postgres.js's own hook (what its `listen` uses), missing from its types.
  const options = {
    max: 1,
    // Never closed for idleness or age: a closed connection is a gap in the notifications.
    idle_timeout: null,
    max_lifetime: null,
    connect_timeout: 10,
    fetch_types: false,
    onnotice: () => {},
    connection: { application_name: applicationName },
    onnotify: (channel: string, payload: string) => deliver(channel, payload),
    onclose: () => {
      drops += 1
      if (!ending && channels.size > 0) lost()
    },
  }
  const target = connectionOptions(url)
  const sql = postgres(target.url, {
    ...options,
    ...(target.host ? { host: target.host } : {}),
  } as unknown as postgres.Options<Record<string, postgres.PostgresType>>)

  /** Subscribes every channel again until one connection holds them all, then says so. */
  const lost = () => {
    if (resubscribing) return
    resubscribing = true
    missed()
    void (async () => {
      let delay = FIRST_RETRY_MS
      while (!ending) {
        const before = drops
        try {
          for (const channel of [...channels.keys()]) await sql.unsafe(listenStatement(channel))
          // A drop while subscribing may have left some channels on a connection that is gone.
          if (drops === before) {
            resubscribing = false
            missed()
            return
          }
        } catch {
          if (ending) break
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, delay)
            wakeLoop = () => {
              clearTimeout(timer)
              resolve()
            }
          })
          wakeLoop = undefined
          delay = Math.min(delay * 2, LAST_RETRY_MS)
        }
      }
      resubscribing = false
    })()
  }

  const listen = async (
    channel: string,
    onMessage: (payload: string) => void,
    onMissed?: () => void,
  ): Promise<() => Promise<void>> => {
    const subscriber: Subscriber = { onMessage, onMissed }
    const existing = channels.get(channel)
    if (existing) existing.add(subscriber)
    else {
      channels.set(channel, new Set([subscriber]))
      try {
        await sql.unsafe(listenStatement(channel))
      } catch (cause) {
        channels.delete(channel)
        throw cause
      }
    }
    return async () => {
      const subscribers = channels.get(channel)
      if (!subscribers?.delete(subscriber) || subscribers.size > 0) return
      channels.delete(channel)
      // Connection lost: so is the subscription, and the reconnect loop subscribes only the channels left. Sending
      // UNLISTEN would wait for a connection to a server that may be down (each up to the connect time-out, and a
      // runtime's disposal unlistens every cache in turn).
      if (resubscribing || ending) return
      await sql.unsafe(unlistenStatement(channel)).catch(() => {
        // The connection is gone: so is the subscription.
      })
    }
  }

  /**
   * Hands `payload` to this pool's own subscribers of `channel`, as a notification from PostgreSQL would,
   * without PostgreSQL: for what this process did and has already committed (see DatabaseShape.announce).
   * Synchronous.
   */
  const announce = (channel: string, payload: string) => deliver(channel, payload)

  /** Ends the connection, and the reconnect loop at once: no wait for a server that is down. */
  const end = async () => {
    ending = true
    wakeLoop?.()
    // Reconnecting, the connection has nothing in flight worth a wait: an attempt to connect is cut off.
    await sql.end({ timeout: resubscribing ? 0 : 1 })
  }

  return { listen, announce, end }
}
