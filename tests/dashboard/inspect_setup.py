"""A worker setup for the object-inspector tests: a Secret informer next to the example controllers
(``--controller controllers.examples.deployments:setup --controller tests.dashboard.inspect_setup:watch_secrets``),
so a test can check what the inspector shows of a Secret."""

from __future__ import annotations

from controllers.reconcile import Manager


def watch_secrets(manager: Manager) -> None:
    manager.informer_for("v1", "Secret")
