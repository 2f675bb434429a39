/**
 * `@agentgov/sdk/ai`: govern the tools of a Vercel AI SDK agent (`ai` ≥ 5; `tool()` definitions
 * passed to `generateText`, `streamText` or an `Agent`). Every tool call the model makes is
 * guarded first, waits for an approval when a policy asks for one, and is tracked afterwards.
 *
 * The adapter needs nothing from `ai` at run time: it wraps each tool's `execute`.
 */
import { isPlainObject } from "./core/json.ts"
import { ActionDenied } from "./errors.ts"
import type { AgentRuntime, GovernedOptions } from "./runtime/AgentRuntime.ts"
import { assertEventType } from "./runtime/EventQueue.ts"
import type { JsonObjectInput } from "./types.ts"

/** The part of an AI SDK tool the adapter touches: its `execute` (tools without one are left alone). */
interface ToolLike {
  readonly execute?: ((input: any, options: any) => unknown) | undefined
}

/** The second argument the AI SDK passes to `execute`. */
interface ToolCallOptions {
  readonly toolCallId?: string
  readonly abortSignal?: AbortSignal
}

/**
 * Options of {@link governTools}.
 *
 * @example
 * ```ts
 * import type { GovernToolsOptions } from "@agentgov/sdk/ai"
 *
 * const options: GovernToolsOptions = {
 *   action: (toolName) => `tool.${toolName}`,
 *   onDenied: (denied) => ({ error: `not allowed: ${denied.decision.reasons[0]?.message}` }),
 * }
 * ```
 */
export interface GovernToolsOptions {
  /** The guard's action for a call. Default: the tool's name (its key in the tool set). */
  readonly action?: (toolName: string, input: unknown) => string
  /** The guard's context for a call. Default: the tool's input when it is an object, else `{input}`. */
  readonly context?: (toolName: string, input: unknown) => JsonObjectInput
  /**
   * What the model gets when a call is not allowed. Default: the {@link ActionDenied} is thrown,
   * which the AI SDK reports to the model as a tool error. Return a value to hand the model a
   * result instead (e.g. `{ error: "not allowed" }`) so it can change course.
   */
  readonly onDenied?: (denied: ActionDenied, toolName: string, input: unknown) => unknown
  /** On `require_approval`, wait for the decision. Default true. */
  readonly waitForApproval?: boolean
  /** Longest wait for an approval. Default: until it is decided or expires. */
  readonly approvalTimeoutMs?: number
  /** The event tracked after each call. Default `tool.called`; false tracks nothing. */
  readonly eventType?: string | false
  /** Tool names to leave ungoverned (e.g. pure reads). */
  readonly exclude?: ReadonlyArray<string>
}

const AsyncGeneratorFunction = Object.getPrototypeOf(async function* () {}).constructor

const isAsyncIterable = (v: unknown): v is AsyncIterable<unknown> =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === "function"

/**
 * Wraps every tool's `execute` so that each call the model makes is governed: guarded by the
 * agent runtime (the tool name is the action, the input the context), held for an approval when
 * a policy requires one, refused with {@link ActionDenied} (or `onDenied`'s value) when denied,
 * and tracked as `tool.called` when it ran. Returns a tool set of the same type; the originals
 * are not modified. Streaming tools (`async function*` executes) are guarded before their first
 * output and tracked after their last (one stopped early by its consumer is tracked as an `error`).
 * A plain `execute` returning an async iterable is read to its end: the AI SDK gets its last output
 * (not the preliminary ones; write it as `async function*` for those).
 *
 * @example
 * ```ts
 * import { generateText, stepCountIs, tool } from "ai"
 * import { z } from "zod"
 * import { AgentGov } from "@agentgov/sdk"
 * import { governTools } from "@agentgov/sdk/ai"
 *
 * const agent = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: process.env.AGENTGOV_URL! }).agent()
 * const tools = governTools(
 *   {
 *     sendEmail: tool({
 *       description: "Send an e-mail",
 *       inputSchema: z.object({ to: z.string(), body: z.string() }),
 *       execute: async ({ to, body }) => mailer.send(to, body),
 *     }),
 *   },
 *   agent,
 * )
 * await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: "Tell finance the invoice is paid" })
 * ```
 */
export function governTools<T extends { readonly [name: string]: ToolLike }>(
  tools: T,
  runtime: AgentRuntime,
  options: GovernToolsOptions = {},
): T {
  // Refused here rather than by the tracking after a tool ran (see governed()).
  if (options.eventType !== undefined && options.eventType !== false) {
    assertEventType(options.eventType, "governTools(): eventType")
  }
  const governed: Record<string, ToolLike> = {}
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute
    if (typeof execute !== "function" || options.exclude?.includes(name)) {
      governed[name] = tool
      continue
    }
    const governedOptions: GovernedOptions<[unknown, ToolCallOptions | undefined]> = {
      action: (input) => options.action?.(name, input) ?? name,
      context: (input) => options.context?.(name, input) ?? (isPlainObject(input) ? input : { input }),
      signal: (_input, call) => call?.abortSignal,
      ...(options.waitForApproval !== undefined ? { waitForApproval: options.waitForApproval } : {}),
      ...(options.approvalTimeoutMs !== undefined ? { approvalTimeoutMs: options.approvalTimeoutMs } : {}),
      ...(options.eventType !== undefined ? { eventType: options.eventType } : {}),
    }
    const denied = (error: unknown, input: unknown) => {
      if (options.onDenied && error instanceof ActionDenied) return options.onDenied(error, name, input)
      throw error
    }
    let wrapped: (input: unknown, call: ToolCallOptions | undefined) => unknown
    if (execute instanceof AsyncGeneratorFunction) {
      wrapped = async function* (input: unknown, call: ToolCallOptions | undefined) {
        let authorized: Awaited<ReturnType<AgentRuntime["authorize"]>>
        try {
          authorized = await runtime.authorize(name, [input, call], governedOptions)
        } catch (error) {
          yield denied(error, input)
          return
        }
        const started = performance.now()
        // A consumer that stops early (an aborted call) ends the generator at a `yield`: the tool ran
        // part of the way, and the trail must still learn that it ran.
        let failure: unknown = new Error("stopped by its consumer before its last output")
        try {
          yield* execute.call(tool, input, call) as AsyncIterable<unknown>
          failure = undefined
        } catch (error) {
          failure = error ?? new Error("threw undefined")
          throw error
        } finally {
          runtime.recordToolCall(name, authorized, started, failure, options.eventType)
        }
      }
    } else {
      const run = runtime.governed(
        name,
        async (input: unknown, call: ToolCallOptions | undefined) => {
          const result = await execute.call(tool, input, call)
          // A plain execute may return an async iterable (a streaming tool the AI SDK iterates). This
          // wrapper answers a promise (it must guard first), so the AI SDK would take the iterable
          // itself as the output: read it here, and answer its last output, tracked after it.
          if (!isAsyncIterable(result)) return result
          let last: unknown
          for await (const output of result) last = output
          return last
        },
        governedOptions,
      )
      wrapped = (input, call) => run(input, call).catch((error) => denied(error, input))
    }
    governed[name] = { ...tool, execute: wrapped }
  }
  return governed as unknown as T
}
