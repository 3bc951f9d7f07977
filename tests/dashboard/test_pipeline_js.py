"""pipeline.js in real headless Chromium: a write the API server answered 403 is drawn as a permission
error that says what was forbidden, in RBAC's terms (verb, resource with its group and subresource,
namespace), read from the write record's method and path."""

from __future__ import annotations

import pytest

from tests.dashboard.static_page import static_page

pytestmark = pytest.mark.browser

@pytest.fixture(scope="module")
def pipeline(browser):
    with static_page(browser, "protocol.js", "spark.js", "pipeline.js", vocabulary=True, body='<div id="box"></div>') as page:
        yield page


@pytest.mark.parametrize(("method", "path", "said"), [
    ("POST", "/api/v1/namespaces/ctrlscope/configmaps", "create configmaps in namespace ctrlscope"),
    ("PUT", "/api/v1/namespaces/default/configmaps/web-summary", "update configmaps in namespace default"),
    ("PATCH", "/apis/apps/v1/namespaces/team-a/deployments/web/scale", "patch deployments.apps/scale in namespace team-a"),
    ("PUT", "/apis/demo.ctrlscope.dev/v1/namespaces/x/podsets/web/status?fieldManager=me",
     "update podsets.demo.ctrlscope.dev/status in namespace x"),
    ("DELETE", "/api/v1/namespaces/default/pods", "deletecollection pods in namespace default"),
    ("DELETE", "/api/v1/namespaces/gone", "delete namespaces"),
    ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "create clusterroles.rbac.authorization.k8s.io"),
])
def test_a_forbidden_write_is_said_as_the_verb_and_resource_rbac_would_name(pipeline, method, path, said):
    assert pipeline.evaluate("([m, p]) => window.ctrlscopePipeline.writeRequest(m, p)", [method, path]) == said


def test_the_api_writes_stage_shows_403s_apart_with_the_last_forbidden_request(pipeline):
    text = pipeline.evaluate("""() => {
      const box = document.getElementById("box");
      window.ctrlscopePipeline.render(box, { informers: [], controller: { writes: 7, writeErrors: 5, writeConflicts: 1,
        writesForbidden: 4, lastForbidden: { method: "POST", path: "/api/v1/namespaces/ctrlscope/configmaps" }, rates: {} } });
      const stage = box.querySelector('.stage[data-stage="writes"]');
      return { failed: stage.querySelector(".stage-err:not(.stage-forbidden)").textContent,
               forbidden: stage.querySelector(".stage-forbidden").textContent,
               help: stage.querySelector(".stage-forbidden").title };
    }""")
    assert text["failed"] == "5 failed (1 × 409 conflict)"
    assert text["forbidden"] == "4 × 403 forbidden: create configmaps in namespace ctrlscope"
    assert "RBAC" in text["help"] and "ResourceQuota" in text["help"]
    none = pipeline.evaluate("""() => {
      const box = document.getElementById("box");
      window.ctrlscopePipeline.render(box, { informers: [], controller: { writes: 3, writeErrors: 1, rates: {} } });
      return box.querySelectorAll(".stage-forbidden").length;
    }""")
    assert none == 0, "no 403, no permission line (the overview's counters carry no 403 count)"
