/*
 * The dashboard's own URLs under its path prefix (CTRLSCOPE_BASE_PATH, dashboard/base_path.py):
 * base.html says it in <meta name="ctrlscope-base">, "" when served at the root. Every fetch, link
 * and the websocket URL of the pages' scripts goes through ctrlscopeUrl("/absolute/path").
 * ctrlscopeUrl.informer(worker, segment) is an informer's page (/c/{worker}/informer/{segment}/,
 * dashboard/urls.py; its snapshot.json and object routes are under it); worker and segment are
 * topic segments.
 */
(function (global) {
  "use strict";
  const meta = global.document.querySelector('meta[name="ctrlscope-base"]');
  const base = meta ? meta.content.replace(/\/+$/, "") : "";
  const U = function (path) { return base + path; };
  global.ctrlscopeUrl = U;
  global.ctrlscopeUrl.base = base;
  global.ctrlscopeUrl.informer = function (worker, segment) {
    return U("/c/" + encodeURIComponent(worker) + "/informer/" + encodeURIComponent(segment) + "/");
  };
})(window);
