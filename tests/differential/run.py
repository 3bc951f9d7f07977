"""Run the differential cases by hand: ``python -m tests.differential.run REAL_KUBECONFIG [CASE...]``.

Starts a simulator in-process, plays the cases against it and the real API server the kubeconfig
names, and prints every difference, marking those docs/simulator-differences.md lists."""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

from controllers.sim import SimCluster
from tests.differential import clients  # noqa: F401 -- registers the client conversations
from tests.differential.cases import CASES, setup_cluster
from tests.differential.harness import Session, Target, differences, load_known, play_all

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator-differences.md"


def main(argv: list[str]) -> int:
    real_config, wanted = Path(argv[0]), argv[1:]
    cases = {k: v for k, v in CASES.items() if not wanted or k in wanted}
    work = Path(tempfile.mkdtemp())
    sim = SimCluster(port=0).start()
    try:
        targets = [Target.from_kubeconfig("sim", sim.write_kubeconfig(work / "sim.yaml")),
                   Target.from_kubeconfig("real", real_config)]
        for target in targets:
            setup_cluster(Session(target, "default", work))
        results = play_all(targets, cases, uuid.uuid4().hex[:5], work, progress=print)
    finally:
        sim.stop()
    known = load_known(DOC) if DOC.exists() else []
    found = differences(results)
    total = 0
    for name, diffs in found.items():
        print(f"\n== {name}")
        for d in diffs:
            listed = any(k.matches(name, d) for k in known)
            total += not listed
            print(f"  {'(listed) ' if listed else ''}{d}")
    recorded = sum(len(r.get("real") or {}) for r in results.values())
    print(f"\n{len(cases)} cases, {recorded} recorded answers, {total} unlisted differences "
          f"in {len(found)} cases")
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
