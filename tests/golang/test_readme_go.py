"""README's "Go controllers" section runs as written.

Its two programs are real files, ``go/examples/informer/main.go`` and ``go/examples/manager/main.go``,
shown in full: the README's code blocks must be those files byte for byte, so the README cannot
drift from code that compiles. The install lines are checked against what they name (the module path
in ``go/go.mod``, the version in ``pyproject.toml``, the Go floor in ``go.mod``'s ``go`` directive), and
then followed as a user would: a new module, the README's ``go get`` line (pointed at this checkout
with the README's ``replace`` line), ``go mod tidy``, ``go build`` of the two programs copied
out of the README. Finally both programs run against the simulated cluster and show up in Redis as a
worker: the informer's handler calls, the manager's reconciles and the ConfigMaps it wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from controllers import golang
from tests.conftest import ROOT, wait_until
from tests.golang.telemetry import Published

README = (ROOT / "README.md").read_text()
SECTION = README[README.index("## Go controllers\n"):README.index("\n## ", README.index("## Go controllers\n") + 1)]
GO_MOD = (ROOT / "go" / "go.mod").read_text()
MODULE = re.search(r"^module (\S+)$", GO_MOD, re.M).group(1)
BLOCK = re.compile(r"\[`(go/examples/[a-z]+/main\.go)`\]\(\1\):\n\n```go\n(.*?)```\n", re.S)
EXAMPLES = {"go/examples/informer/main.go", "go/examples/manager/main.go"}


def test_the_readme_shows_each_example_program_exactly_as_it_is():
    blocks = dict(BLOCK.findall(SECTION))
    assert set(blocks) == EXAMPLES, "each example's link, a blank line, then its ```go block"
    for path, text in blocks.items():
        assert text == (ROOT / path).read_text(), f"README's block for {path} differs from the file"


def test_the_install_lines_name_the_module_its_version_and_the_go_floor():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"```sh\ngo get {MODULE}@v{version}\n```" in SECTION
    assert f"the git tag `go/v{version}`" in SECTION
    floor = re.search(r"^go (\d+\.\d+)(?:\.\d+)?$", GO_MOD, re.M).group(1)
    assert f"Go {floor} or newer (`go/go.mod`'s `go` directive)" in SECTION
    assert f"go mod edit -replace {MODULE}=/path/to/ctrlscope/go" in SECTION


def go_or_skip() -> str:
    go = golang.find_go()
    if go is None:
        if os.environ.get("CI"):
            pytest.fail("no Go toolchain in CI: make test should have provided one (scripts/go-toolchain)")
        pytest.skip("no Go toolchain (CTRLSCOPE_GO, go on PATH or /usr/local/go/bin/go)")
    return go


def test_a_new_module_following_the_readme_builds_both_programs(tmp_path):
    go = go_or_skip()
    # The replace line points at this checkout; every other module comes from the cache the
    # repository's own build filled or, for what only a new module's tidy needs (the go.mod of a
    # version the repository's graph prunes, e.g. go-spew v1.1.1 behind zapr), from the module proxy
    # as a user's would: a fresh CI cache had none of those and GOPROXY=off failed there. No checksum
    # database (only the proxy is reachable here; go/go.sum already pins what the build uses).
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOSUMDB": "off", "GOWORK": "off"}

    def run(*args: str) -> None:
        out = subprocess.run(list(args), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"{' '.join(args)}:\n{out.stdout}{out.stderr}"

    for path, text in BLOCK.findall(SECTION):
        target = tmp_path / Path(path).parent.name / "main.go"
        target.parent.mkdir()
        target.write_text(text)
    run(go, "mod", "init", "example.com/my-controllers")
    replace = re.search(r"`(go mod edit -replace \S+=)/path/to/ctrlscope/go`", SECTION).group(1)
    run(go, *(replace + str(ROOT / "go")).split()[1:])
    get = re.search(r"```sh\n(go get \S+)\n```", SECTION).group(1)
    run(go, *get.split()[1:])
    run(go, "mod", "tidy")
    run(go, "build", "-o", str(tmp_path / "bin") + "/", "./...")
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == ["informer", "manager"]


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> dict[str, Path]:
    go = go_or_skip()
    out = tmp_path_factory.mktemp("go-examples")
    built = subprocess.run([go, "build", "-o", str(out) + "/", "./examples/..."], cwd=ROOT / "go",
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    return {p.name: p for p in out.iterdir()}


def test_both_programs_run_against_the_simulated_cluster(examples, sim_kubeconfig, redis_url, prefix, tmp_path):
    from tests.golang.conftest import GoProcess
    from tests.golang.test_go_samples import kubectl

    informer = GoProcess(examples["informer"], ["--kubeconfig", str(sim_kubeconfig), "--worker-name", "readme-informer"],
                         redis_url=redis_url, prefix=prefix, log=tmp_path / "informer.log")
    manager = GoProcess(examples["manager"], ["--kubeconfig", str(sim_kubeconfig)], redis_url=redis_url, prefix=prefix,
                        log=tmp_path / "manager.log")
    published = Published(redis_url, prefix)
    try:
        kubectl(sim_kubeconfig, tmp_path, "create", "deployment", "readme-web", "--image=nginx:1.27", "--replicas=2")
        wait_until(lambda: any(r.get("key") == "default/readme-web"
                               for r in published.records("w/readme-informer/informer/apps_v1_Deployment", "handler")),
                   timeout=60, what="the informer example's handler call for default/readme-web")
        worker = published.state("w/readme-informer/components").get("worker/readme-informer") or {}
        assert worker.get("runtime") == "go"
        wait_until(lambda: (published.state("w/replicas-summary/controller/replicas-summary")
                            .get("default/readme-web") or {}).get("result") == "success",
                   timeout=60, what="the manager example's successful reconcile of default/readme-web")
        wait_until(lambda: "default/readme-web-replicas" in published.state(
            "w/replicas-summary/informer/v1_ConfigMap"), timeout=30, what="its ConfigMap in the observed cache")
        assert published.records("w/replicas-summary/metrics", "metrics"), "Instrument samples the metrics"
    finally:
        published.close()
        for p in (manager, informer):
            p.stop()
    for log in ("informer.log", "manager.log"):
        text = (tmp_path / log).read_text()
        assert "connection pool" not in text and "reconnected to Redis" not in text, (log, text[-2000:])
