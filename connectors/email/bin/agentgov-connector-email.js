#!/usr/bin/env -S node --conditions=@agentgov/source --max-semi-space-size=2
// `npx agentgov-connector-email [start|install|uninstall|dead-letters|replay|check|help]`
import "../src/main.ts"
