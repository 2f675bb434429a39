import sharp from "sharp"

/** A seeded generator: the corpus is the same on every run. */
export const rng = (seed: number) => {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}
/** A generated scene: a gradient, shapes and a little texture. */
export const scene = (seed: number, width = 640, height = 480) => {
  const r = rng(seed)
  const colour = () => `rgb(${Math.floor(r() * 255)},${Math.floor(r() * 255)},${Math.floor(r() * 255)})`
  const shapes = Array.from({ length: 25 }, () =>
    r() > 0.5
      ? `<circle cx="${r() * width}" cy="${r() * height}" r="${10 + r() * 120}" fill="${colour()}" fill-opacity="${0.4 + r() * 0.6}"/>`
      : `<rect x="${r() * width}" y="${r() * height}" width="${20 + r() * 200}" height="${20 + r() * 200}" fill="${colour()}" transform="rotate(${r() * 90} ${width / 2} ${height / 2})"/>`,
  ).join("")
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="${colour()}"/><stop offset="1" stop-color="${colour()}"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/>${shapes}</svg>`
  return sharp(Buffer.from(svg)).jpeg({ quality: 92 }).toBuffer()
}

/** A paragraph of plain English prose: the registered text of the text cases. */
export const ARTICLE =
  "The committee met on Tuesday to review the harbour dredging plan. Engineers presented three options for the " +
  "northern channel, each with a different schedule for moving the silt barges. The cheapest option would close " +
  "the ferry route for six weeks during the spring season, which the merchants' association opposed in writing. " +
  "A compromise emerged late in the afternoon: dredge at night, keep one lane open, and publish weekly soundings " +
  "so that pilots can plan their approaches. The council will vote on the amended plan next month after a public " +
  "hearing at the maritime museum, where models of the channel will be on display for residents to inspect."
