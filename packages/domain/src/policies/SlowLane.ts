/**
 * What a guard call's evaluation may cost, in `EVALUATION_BUDGET`'s units, and still run inline
 * as it arrives: about 0.15–0.3 ms of CPU at the 13–27 ns a unit measured here. A call whose
 * action can cost more (its rules' static bound, `CompiledPolicySet.costOf`), or whose workspace's
 * evaluations lately did, waits its turn in the {@link SlowLane}.
 */
export const SLOW_LANE_COST = 10_000

/** How long a workspace whose evaluation cost more than {@link SLOW_LANE_COST} keeps all its calls in the lane. */
export const HEAVY_FOR_MS = 10_000

/**
 * Calls one workspace may have waiting: with each at most one evaluation's budget (a few ms),
 * the last waits well under a second. Past it the call is refused (429 with Retry-After) rather
 * than held: every waiting call holds its request (up to 32 KiB of context) in memory.
 */
export const SLOW_LANE_PER_WORKSPACE = 64
/** Calls waiting across workspaces, so that many tenants together cannot hold unbounded memory either. */
export const SLOW_LANE_TOTAL = 4_096

/**
 * Costly guard evaluations, one at a time, each in its own turn of the event loop (so the I/O
 * that arrived meanwhile, every other tenant's cheap calls included, is handled between two),
 * taking the workspaces that have calls waiting in turn: one workspace's long queue delays
 * another's costly call by at most one evaluation per workspace waiting, never by its own
 * length. After an evaluation that took d ms the lane rests d ms before the next, so costly
 * evaluations take at most about half of the process's time: in paired guard-fairness runs here, an
 * immediate next turn left the other tenant's p99 at 32–34 ms, resting brought it to 15–17 ms
 * (and the costly tenant's throughput did not drop). Everything here is synchronous;
 * `schedule` and `clock` are injectable so that tests drive the turns.
 */
export class SlowLane {
  /** Waiting jobs by workspace; the map's order is the round-robin order. */
  readonly #queues = new Map<string, Array<() => void>>()
  #waiting = 0
  /** A turn is scheduled or running: the next is scheduled when it ends. */
  #busy = false
  /** No turn before this (the clock's ms): the rest after the last evaluation. */
  #restUntil = 0
  readonly #schedule: (turn: () => void, delayMs: number) => void
  readonly #clock: () => number
  readonly #perWorkspace: number
  readonly #total: number

  constructor(
    options: {
      readonly schedule?: (turn: () => void, delayMs: number) => void
      readonly clock?: () => number
      readonly perWorkspace?: number
      readonly total?: number
    } = {},
  ) {
    this.#schedule =
      options.schedule ?? ((turn, delayMs) => (delayMs >= 1 ? setTimeout(turn, delayMs) : setImmediate(turn)))
    this.#clock = options.clock ?? (() => performance.now())
    this.#perWorkspace = options.perWorkspace ?? SLOW_LANE_PER_WORKSPACE
    this.#total = options.total ?? SLOW_LANE_TOTAL
  }

  /** Calls waiting, all workspaces together or one's. */
  waiting(workspaceId?: string): number {
    return workspaceId === undefined ? this.#waiting : (this.#queues.get(workspaceId)?.length ?? 0)
  }

  /**
   * Queues `job` for its workspace's turn. Undefined, with nothing queued, when the workspace's
   * queue or the lane is full; otherwise a function that takes the job back out if it has not run.
   */
  offer(workspaceId: string, job: () => void): (() => void) | undefined {
    const queue = this.#queues.get(workspaceId)
    if ((queue?.length ?? 0) >= this.#perWorkspace || this.#waiting >= this.#total) return undefined
    if (queue) queue.push(job)
    else this.#queues.set(workspaceId, [job])
    this.#waiting++
    if (!this.#busy) this.#next()
    return () => {
      const q = this.#queues.get(workspaceId)
      const at = q ? q.indexOf(job) : -1
      if (at < 0) return
      q!.splice(at, 1)
      this.#waiting--
      if (q!.length === 0) this.#queues.delete(workspaceId)
    }
  }

  #next() {
    this.#busy = true
    this.#schedule(this.#turn, Math.max(0, this.#restUntil - this.#clock()))
  }

  readonly #turn = () => {
    const next = this.#queues.entries().next()
    if (next.done) {
      this.#busy = false
      return
    }
    const [workspaceId, queue] = next.value
    const job = queue.shift()!
    this.#waiting--
    // The workspace goes to the back of the round, or leaves it.
    this.#queues.delete(workspaceId)
    if (queue.length > 0) this.#queues.set(workspaceId, queue)
    const started = this.#clock()
    try {
      job()
    } finally {
      const ended = this.#clock()
      this.#restUntil = ended + (ended - started)
      if (this.#queues.size > 0) this.#next()
      else this.#busy = false
    }
  }
}
