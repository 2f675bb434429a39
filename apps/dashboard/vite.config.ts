import react from "@vitejs/plugin-react"
import { defineConfig } from "vite"

/**
 * The dashboard's build (`npm run build -w @agentgov/dashboard`, into dist/, served by apps/server at `/`) and
 * its dev server (`npm run dev -w @agentgov/dashboard`), which proxies the service's paths to AGENTGOV_URL.
 * Run the service with AGENTGOV_PUBLIC_URL=http://localhost:5173 in development, so that sign-in returns
 * through the proxy and the session cookie and the Origin check are the dev server's (see README).
 */
const target = process.env.AGENTGOV_URL ?? "http://127.0.0.1:3000"
const proxied = ["/trpc", "/auth", "/api", "/v1", "/oauth", "/.well-known", "/healthz"]

export default defineConfig({
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // No inline <script> or data: module: everything the strict CSP allows, from this origin.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
  server: {
    port: 5173,
    strictPort: true,
    proxy: Object.fromEntries(proxied.map((p) => [p, { target, changeOrigin: false, ws: false }])),
  },
})
