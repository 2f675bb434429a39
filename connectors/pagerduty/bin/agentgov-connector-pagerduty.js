#!/usr/bin/env -S node --conditions=@agentgov/source
// `npx agentgov-connector-pagerduty [start|install|uninstall|dead-letters|replay|check|help]`
import "../src/main.ts"
