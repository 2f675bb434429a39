/** Types for apply.mjs's exports (the script itself is plain JavaScript, run by npm's Node.js). */
export interface Patch {
  readonly name: string
  readonly mark: string
  readonly issue: string
  readonly connection?: ReadonlyArray<readonly [string, string]>
  readonly index?: ReadonlyArray<readonly [string, string]>
  readonly queue?: ReadonlyArray<readonly [string, string]>
}
export declare const PATCHES: ReadonlyArray<Patch>
export declare const patchedFiles: (patch: Patch) => Array<[string, "connection" | "index" | "queue"]>
