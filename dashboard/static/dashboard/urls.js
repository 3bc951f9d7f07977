/*
 * The dashboard's own URLs under its path prefix (CTRLSCOPE_BASE_PATH, dashboard/base_path.py):
 * base.html says it in <meta name="ctrlscope-base">, "" when served at the root. Every fetch, link
 * and the websocket URL of the pages' scripts goes through ctrlscopeUrl("/absolute/path").
 * ctrlscopeUrl.informer(worker, segment) is an informer's page (/c/{worker}/informer/{segment}/,
 * dashboard/urls.py; its snapshot.json and object routes are under it); ctrlscopeUrl.watcher(worker,
 * segment) a raw watcher's (/c/{worker}/watcher/{segment}/, protocol v1.6); worker and segment are
 * topic segments. ctrlscopeUrl.controller(worker, segment) is a controller's page, and
 * ctrlscopeUrl.key(worker, segment, key) one key's page under it (/c/{worker}/{controller}/k/{namespace}/{name},
 * /k/{name} for a cluster-scoped object; key is the cache key "namespace/name" or "name").
 */
(function (global) {
  "use strict";
  const meta = global.document.querySelector('meta[name="ctrlscope-base"]');
  const base = meta ? meta.content.replace(/\/+$/, "") : "";
  const U = function (path) { return base + path; };
  global.ctrlscopeUrl = U;
  global.ctrlscopeUrl.base = base;
  // A component's page: its route's segment is its topic kind (protocol.js loads after this file,
  // so the kind is looked up when a page asks, not here).
  const componentPage = (kind) => function (worker, segment) {
    return U("/c/" + encodeURIComponent(worker) + "/" + global.ctrlscopeProtocol.TopicKind[kind] + "/" + encodeURIComponent(segment) + "/");
  };
  global.ctrlscopeUrl.informer = componentPage("INFORMER");
  global.ctrlscopeUrl.watcher = componentPage("WATCHER");
  const controllerPage = (worker, segment) => U("/c/" + encodeURIComponent(worker) + "/" + encodeURIComponent(segment) + "/");
  global.ctrlscopeUrl.controller = controllerPage;
  global.ctrlscopeUrl.key = (worker, segment, key) =>
    controllerPage(worker, segment) + "k/" + String(key).split("/").map(encodeURIComponent).join("/");
})(window);
