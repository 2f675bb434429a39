import type sharpModule from "sharp"

let loaded: Promise<typeof sharpModule> | undefined

/**
 * sharp, loaded at its first use rather than when the server starts: it brings libvips and its libraries,
 * memory that an instance which never registers or scans an image has no use for.
 */
export const loadSharp = (): Promise<typeof sharpModule> => {
  loaded ??= import("sharp").then((m) => m.default)
  return loaded
}
