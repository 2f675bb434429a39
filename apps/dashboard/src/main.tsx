import { StrictMode } from "react"
import { createRoot } from "react-dom/client"
import { App } from "./App.tsx"
import { prefetchOverview } from "./api.ts"
import { preloadPage } from "./routes.ts"
import { WORKSPACE_KEY } from "./session.tsx"
import { applyTheme, storedTheme } from "./theme.ts"
import "./styles.css"

applyTheme(storedTheme())
// The page's own code loads while the session is read (session.tsx starts that read as it loads).
preloadPage(location.pathname)
// The overview's data too, for the workspace of the last visit (no waterfall behind the session read).
const lastWorkspace = localStorage.getItem(WORKSPACE_KEY)
if (location.pathname === "/" && lastWorkspace) prefetchOverview(lastWorkspace)
createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
)
