"""The simulator held to a real kube-apiserver: every case in ``cases.py`` (and the client
conversations) played against both, compared; a difference must be listed, with its reason, in
docs/simulator-differences.md, and every listed row must still match one (see harness.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controllers.sim import SimCluster
from tests.conftest import ROOT
from tests.differential import clients  # noqa: F401 -- registers the client conversations
from tests.differential.cases import CASES, setup_cluster
from tests.differential.harness import Known, Session, Target, differences, load_known, play_all

pytestmark = pytest.mark.realcluster

DOC = ROOT / "docs" / "simulator-differences.md"


@pytest.fixture(scope="module")
def targets(realcluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Target]]:
    """The simulator as ``manage.py simcluster`` runs it (default timings) and the real server."""
    work = tmp_path_factory.mktemp("differential")
    sim = SimCluster(port=0).start()
    try:
        pair = [Target.from_kubeconfig("sim", sim.write_kubeconfig(work / "sim.yaml")),
                Target.from_kubeconfig("real", Path(realcluster.kubeconfig))]
        for target in pair:
            setup_cluster(Session(target, "default", work))
        yield pair
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def results(targets: list[Target], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return play_all(targets, CASES, uuid.uuid4().hex[:5], tmp_path_factory.mktemp("cases"))


def unlisted(found: dict[str, list[str]], known: list[Known]) -> list[str]:
    return [f"{case}: {d}" for case, diffs in found.items() for d in diffs
            if not any(k.matches(case, d) for k in known)]


def test_every_case_ran_on_both_servers(results: dict[str, dict[str, Any]]) -> None:
    broken = {f"{case} on {target}": records.get("<exception>") or records.get("<harness>")
              for case, by_target in results.items() for target, records in by_target.items()
              if "<exception>" in records or "<harness>" in records}
    assert not broken, broken
    answers = sum(len(by_target["real"]) for by_target in results.values())
    assert answers >= 150, f"only {answers} answers compared"


def test_the_simulator_answers_like_the_real_server(results: dict[str, dict[str, Any]]) -> None:
    known = load_known(DOC)
    assert known, f"no rows read from {DOC}"
    found = differences(results)
    new = unlisted(found, known)
    assert not new, (f"{len(new)} differences between the simulator and the real server are not listed in "
                     f"{DOC.relative_to(ROOT)} (fix the simulator, or list them with a reason):\n" + "\n".join(new))
    stale = [k for k in known if not any(k.matches(case, d) for case, diffs in found.items() for d in diffs)]
    assert not stale, ("rows of the differences page match no difference any more (the simulator was fixed, or "
                       "a case changed): remove them:\n" + "\n".join(f"{k.case} {k.path}" for k in stale))
