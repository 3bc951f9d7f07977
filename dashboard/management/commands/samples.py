"""``python manage.py samples``: the sample Deployments and PodSets ``make demo`` starts with (and the
PodSet CRD), for a stack started another way (``docker-compose.yml``). By default in the simulated
cluster (``CTRLSCOPE_SIM_KUBECONFIG``); objects already there are left alone, so it can run again.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from dashboard.management.commands.demo import KOPF_SAMPLE_PODSET, create_samples


class Command(BaseCommand):
    help = "Create the demo's sample Deployments and PodSets (default: in the simulated cluster)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--kubeconfig",
                            default=settings.CTRLSCOPE_SIM_KUBECONFIG or str(settings.RUN_DIR / "kubeconfig-sim.yaml"),
                            help="the cluster (default: the simulated one, CTRLSCOPE_SIM_KUBECONFIG)")
        parser.add_argument("--kopf", action=argparse.BooleanOptionalAction, default=True,
                            help=f"also the PodSet the kopf operator handles ({KOPF_SAMPLE_PODSET}; default: yes)")

    def handle(self, *args: Any, **opts: Any) -> None:
        create_samples(opts["kubeconfig"], kopf=opts["kopf"])
        self.stdout.write(f"samples created in {opts['kubeconfig']} (those already there left alone)")
