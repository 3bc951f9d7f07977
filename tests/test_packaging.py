"""``pip install .`` gives a ``ctrlscope`` command that works outside the checkout, and the package's
metadata and requirements files agree.

The install test builds the package from a copy of the tree (a build writes ``build/`` and
``*.egg-info`` beside ``pyproject.toml``) into a scratch venv that reaches this venv's site-packages
through a ``.pth`` for the dependencies, so only ctrlscope itself is built and installed (offline:
``--no-index --no-build-isolation``). Then, from a directory that is not the checkout and with a
home of its own: ``ctrlscope --help``, subcommand help, ``ctrlscope dashboard --check`` (templates,
static files and protocol files found inside the installed package), ``migrate`` and ``createuser``
into the per-user default database, and a worker publishing to Redis from a simulator.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path

import pytest
import redis
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CODE = ("ctrlscope", "controllers", "dashboard")
# What a checkout keeps outside the packages and an installed package carries inside them.
MAPPED = {"templates": ("dashboard", "templates"), "protocol": ("controllers", "_protocol")}
# Pinned in requirements.txt for a reproducible app, but only ever installed through another
# dependency (kopf's, aiohttp's and Twisted's): not the package's own dependencies.
TRANSITIVE_PINS = {"click", "iso8601", "jsonpatch", "jsonpointer", "python-json-logger", "attrs"}
TEST_TOOLS = {"pytest", "pytest-timeout", "hypothesis", "playwright", "ruff", "import-linter",
              "jsonschema"}


def pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file (canonical names), ``-r`` lines not followed."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{path.name}: {line} is not an exact pin"
            out[canonicalize_name(req.name)] = spec.version
    return out


def test_package_metadata_ranges_hold_the_apps_exact_pins():
    runtime = pins(ROOT / "requirements.txt")
    extras = [r for reqs in PYPROJECT["project"].get("optional-dependencies", {}).values() for r in reqs]
    declared = {canonicalize_name(r.name): r for r in map(Requirement, [*PYPROJECT["project"]["dependencies"], *extras])}
    for name, req in declared.items():
        assert name in runtime, f"pyproject.toml depends on {name}, which requirements.txt does not pin"
        assert req.specifier.contains(runtime[name]), f"{name}=={runtime[name]} is outside pyproject's {req.specifier}"
        assert any(s.operator == "<" for s in req.specifier), f"{name}: give the range an upper bound ({req.specifier})"
    undeclared = set(runtime) - set(declared) - TRANSITIVE_PINS
    assert not undeclared, f"requirements.txt pins {sorted(undeclared)}: add them to pyproject.toml's dependencies (or an extra)"


def test_runtime_and_test_requirements_are_split():
    runtime, test = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-test.txt")
    first = next(line for line in (ROOT / "requirements-test.txt").read_text().splitlines()
                 if line.strip() and not line.startswith("#"))
    assert first == "-r requirements.txt"
    assert not TEST_TOOLS & set(runtime), f"test tooling in requirements.txt: {sorted(TEST_TOOLS & set(runtime))}"
    assert TEST_TOOLS <= set(test)
    assert not set(runtime) & set(test), f"pinned in both files: {sorted(set(runtime) & set(test))}"
    assert "# test and tooling" not in (ROOT / "requirements.txt").read_text(), \
        "test tools go in requirements-test.txt, not under requirements.txt's '# test and tooling'"
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements-test.txt" in makefile and re.search(r"^\$\(STAMP\):.*requirements-test\.txt", makefile, re.M)


def test_every_package_is_listed():
    """pyproject.toml lists its packages (templates/ and protocol/ are mapped in): a new package
    under controllers/ or dashboard/ must be added there, or the installed command lacks it."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for top in CODE for p in (ROOT / top).rglob("__init__.py")}
    assert found - listed == set(), f"add to pyproject.toml's [tool.setuptools] packages: {sorted(found - listed)}"
    mapped = {".".join(pkg) for pkg in MAPPED.values()}
    assert listed - found == mapped


def copy_sources(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in (*CODE, *MAPPED):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the scratch venv's bin, its site-packages, a home, a directory outside the checkout)."""
    tmp = tmp_path_factory.mktemp("pkg")
    venv = tmp / "venv"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "ctrlscope-test-deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    src = copy_sources(tmp / "src")
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                             "--no-build-isolation", "--disable-pip-version-check", str(src)],
                            capture_output=True, text=True, timeout=180, cwd=tmp)
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"venv + pip install: {time.monotonic() - started:.1f} s")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return venv / "bin", site, tmp / "home", elsewhere


def run(installed, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir, _, home, cwd = installed
    base = {k: v for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV"} and not k.startswith(("CTRLSCOPE_", "XDG_"))}
    full = {**base, "PATH": f"{bin_dir}{os.pathsep}{base.get('PATH', '')}", "HOME": str(home), **env}
    return subprocess.run([str(bin_dir / "ctrlscope"), *args], cwd=cwd, env=full, input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_installed_command_runs_outside_the_checkout(installed, redis_url, prefix):
    _, site, home, cwd = installed
    assert not (site / "tests").exists() and not (site / "bench").exists() and not (site / "manage.py").exists()
    for top in CODE:  # every module and data file, where the installed processes look for it
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".json", ".js", ".css", ".html", ".lua") and "__pycache__" not in path.parts:
                assert (site / path.relative_to(ROOT)).is_file(), f"not installed: {path.relative_to(ROOT)}"
    for checkout_dir, package_dir in MAPPED.items():
        wanted = (p for p in (ROOT / checkout_dir).rglob("*") if p.suffix in (".html", ".lua", ".json")
                  and "vectors" not in p.parts)
        for path in wanted:
            assert (site.joinpath(*package_dir) / path.relative_to(ROOT / checkout_dir)).is_file(), path

    helped = run(installed, "--help")
    assert helped.returncode == 0, helped.stderr
    for sub in ("demo", "dashboard", "worker", "simcluster", "kopf", "record", "replay", "scenario", "migrate",
                "createuser"):
        assert re.search(rf"^\s+{sub}\s", helped.stdout, re.M), f"ctrlscope --help does not list {sub}"
    worker = run(installed, "worker", "--help")
    assert worker.returncode == 0 and "usage: ctrlscope worker" in worker.stdout and "--controller" in worker.stdout, \
        worker.stdout + worker.stderr
    unknown = run(installed, "frobnicate")
    assert unknown.returncode == 2 and "unknown command" in unknown.stderr

    secret = {"CTRLSCOPE_SECRET_KEY": "packaging-test-only"}
    check = run(installed, "dashboard", "--check", **secret)
    assert check.returncode == 0, check.stdout + check.stderr
    found = dict(line.split(":", 1) for line in check.stdout.splitlines() if ":" in line)
    for what in ("templates", "static files", "protocol", "simulator protobuf schema"):
        path = Path(found[what].strip())
        assert path.is_relative_to(site) and path.exists(), f"{what} from {path}, not the installed package"
    state = home / ".local" / "state" / "ctrlscope"
    assert found["run directory"].strip() == str(state)
    assert found["database"].strip() == f"sqlite3 {state / 'ctrlscope.sqlite3'}"

    migrated = run(installed, "migrate", "-v0", **secret)
    assert migrated.returncode == 0, migrated.stderr
    user = run(installed, "createuser", "alice", "--role", "operator", "--password-stdin",
               stdin="a long packaging password\n", **secret)
    assert user.returncode == 0 and "created operator alice" in user.stdout, user.stdout + user.stderr
    assert (state / "ctrlscope.sqlite3").is_file()

    # A worker, as a user runs it in their own image, against a simulator, publishing to Redis.
    bin_dir = installed[0]
    kubeconfig = home / "sim.yaml"
    env = {**{k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE"}},
           "HOME": str(home), "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, **secret}
    procs = [subprocess.Popen([str(bin_dir / "ctrlscope"), "simcluster", "--port", "0", "--no-telemetry",
                               "--kubeconfig", str(kubeconfig)], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    log = home / "worker.log"
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists() and procs[0].poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kubeconfig.exists(), "the installed simcluster wrote no kubeconfig"
        with open(log, "wb") as out:
            procs.append(subprocess.Popen([str(bin_dir / "ctrlscope"), "worker", "--kubeconfig", str(kubeconfig),
                                           "--worker-name", "pkg-test", "--cluster-name", "simulated",
                                           "--controller", "controllers.examples.deployments:setup"],
                                          cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT))
        r = redis.Redis.from_url(redis_url)
        while not r.keys(f"{prefix}*") and procs[1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert r.keys(f"{prefix}*"), f"the installed worker published nothing:\n{log.read_text()}"
        procs[1].terminate()
        assert procs[1].wait(timeout=20) == 0, log.read_text()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
