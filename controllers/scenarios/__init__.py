"""Guided scenarios: scripted cluster events and faults that make informer handlers and a Reconciler
behave differently, each with a narration (what to watch) and the claims it checks at the end.

A scenario drives the cluster only through the Kubernetes API and the simulator's ``/_sim/`` fault
endpoints — never through the controllers — so it runs the same against a worker in another process
(``python manage.py scenario NAME`` while ``make demo`` runs) and against a Manager inside a test.
It assumes the PodSet example controllers (``controllers.examples.podset:setup``) are running.
"""

from controllers.scenarios.base import Claim, Scenario, ScenarioContext, ScenarioResult
from controllers.scenarios.library import SCENARIOS

__all__ = ["SCENARIOS", "Claim", "Scenario", "ScenarioContext", "ScenarioResult"]
