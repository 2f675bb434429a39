/**
 * `@agentgov/connector-sdk/format`: every event as a neutral message (title, summary, severity,
 * fields, link, thread subject) for connector apps to render, plus the shared look of severities.
 */

export {
  duration,
  FORMATTED_EVENT_TYPES,
  type FormatOptions,
  type FormattedEvent,
  type FormattedField,
  formatEvent,
  plain,
  when,
} from "./formatEvent.ts"
export { BIDI_CONTROLS, dropBidiControls, LINE_BREAKS, oneLine, SEVERITY_STYLE, truncate } from "./style.ts"
