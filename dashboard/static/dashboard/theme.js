/*
 * Light / dark theme. "auto" follows the OS (prefers-color-scheme); "light" and "dark" are set on
 * <html data-theme> and remembered in localStorage. Loaded in <head>, before the page paints, so a
 * dark choice never flashes light. The topbar button cycles auto → light → dark; the `t` key too.
 */
(function () {
  "use strict";
  const KEY = "ctrlscope-theme";
  const ORDER = ["auto", "light", "dark"];
  function stored() { try { return localStorage.getItem(KEY) || "auto"; } catch (e) { return "auto"; } }
  function apply(theme) {
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
    else delete document.documentElement.dataset.theme;
    const b = document.getElementById("theme-toggle");
    if (b) { b.textContent = "◐ " + theme; b.title = "theme: " + theme + " (t to change)"; }
  }
  function next() {
    const theme = ORDER[(ORDER.indexOf(stored()) + 1) % ORDER.length];
    try { localStorage.setItem(KEY, theme); } catch (e) { /* private mode: this page only */ }
    apply(theme);
  }
  apply(stored());
  document.addEventListener("DOMContentLoaded", () => {
    apply(stored());
    const b = document.getElementById("theme-toggle");
    if (b) b.addEventListener("click", next);
  });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "t" || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target instanceof HTMLElement && e.target.matches("input, textarea, select, [contenteditable]")) return;
    next();
  });
  window.ctrlscopeTheme = { next: next, current: stored };
})();
