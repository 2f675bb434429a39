#!/usr/bin/env -S node --optimize-for-size --max-semi-space-size=1 --no-turbofan --no-maglev
// `npx agentgov-connector-slack [start|install|uninstall|dead-letters|replay|check|help]`: runs the app's bundle,
// dist/main.mjs, built first when it is missing or older than any of its sources (connectors/bundle.mjs)
import { runBundled } from "../../bundle.mjs"

await runBundled(new URL("..", import.meta.url))
