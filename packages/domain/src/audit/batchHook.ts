/**
 * The audit appender's one observation point (issue 34): when set, each group-commit batch runs
 * inside it, so the server can time it, count it and trace it. Unset (the default, and whenever
 * metrics and tracing are off) the appender reads this one property per batch and nothing else.
 */
export type BatchHook = <A>(appends: number, events: number, write: () => Promise<A>) => Promise<A>

export const appendBatchHook: { current: BatchHook | undefined } = { current: undefined }
