import { StrictMode } from "react"
import { createRoot } from "react-dom/client"
import { App } from "./App.tsx"
import { preloadPage } from "./routes.ts"
import { applyTheme, storedTheme } from "./theme.ts"
import "./styles.css"

applyTheme(storedTheme())
// The page's own code loads while the session (and the overview's data) are read: public/early.js started them.
preloadPage(location.pathname)
createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
)
