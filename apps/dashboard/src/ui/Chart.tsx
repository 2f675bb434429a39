import { useEffect, useRef } from "react"
import uPlot from "uplot"
import "uplot/dist/uPlot.min.css"

export interface Series {
  readonly label: string
  readonly values: ReadonlyArray<number | null>
  /** A CSS custom property (`--accent`) or colour. */
  readonly color: string
}

/**
 * A colour the canvas can use: a custom property's value is light-dark(…) until a property of an element uses it,
 * so it is resolved as the colour of a probe inside `el` (its theme).
 */
const resolve = (el: Element, c: string) => {
  if (!c.startsWith("--")) return c
  const probe = document.createElement("span")
  probe.style.color = `var(${c})`
  el.append(probe)
  const color = getComputedStyle(probe).color
  probe.remove()
  return color || "#6366f1"
}

/**
 * A time-series chart (uPlot: small, maintained, canvas). `x` in seconds since the epoch. The figure carries a
 * text summary for screen readers; the chart follows its container's width and the theme's colours.
 */
export function TimeChart({
  x,
  series,
  height = 220,
  label,
  summary,
  bars = false,
}: {
  x: ReadonlyArray<number>
  series: ReadonlyArray<Series>
  height?: number
  label: string
  summary: string
  bars?: boolean
}) {
  const ref = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = ref.current
    if (!el) return
    const muted = resolve(el, "--muted")
    const grid = resolve(el, "--border")
    const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } }
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [axis, { ...axis, size: 44 }],
      series: [
        {},
        ...series.map((s) => {
          const color = resolve(el, s.color)
          return {
            label: s.label,
            stroke: color,
            width: 2,
            fill: bars ? color : `${color}22`,
            ...(bars ? { paths: uPlot.paths.bars!({ size: [0.6, 40] }) } : {}),
            points: { show: false },
          }
        }),
      ],
    }
    // Bars of zero are not drawn (uPlot would draw a hairline for each).
    const values = series.map((s) => s.values.map((v) => (bars && v === 0 ? null : v)))
    const plot = new uPlot(opts, [x as number[], ...values], el)
    const ro = new ResizeObserver(() => plot.setSize({ width: Math.max(200, el.clientWidth), height }))
    ro.observe(el)
    return () => {
      ro.disconnect()
      plot.destroy()
    }
  }, [x, series, height, bars])
  return (
    <figure className="chart-figure" aria-label={label} style={{ margin: 0 }}>
      <div ref={ref} className="chart" aria-hidden="true" />
      <figcaption className="sr-only">{summary}</figcaption>
    </figure>
  )
}
