/** Light, dark, or the system's: a preference (not a secret), kept in localStorage, applied as data-theme. */
export type Theme = "system" | "light" | "dark"
const KEY = "agentgov.theme"

export const storedTheme = (): Theme => {
  const t = localStorage.getItem(KEY)
  return t === "light" || t === "dark" ? t : "system"
}

export const applyTheme = (t: Theme) => {
  if (t === "system") {
    document.documentElement.removeAttribute("data-theme")
    localStorage.removeItem(KEY)
  } else {
    document.documentElement.dataset.theme = t
    localStorage.setItem(KEY, t)
  }
}
