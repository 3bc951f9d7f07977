"""The Docker image is the runtime only (requirements.txt, no test tooling, no tests/ or bench/), runs
as a numeric non-root user, and what it copies is a working /app. There is no Docker engine here: the
last test assembles the tree the Dockerfile would copy, as .dockerignore filters the build context,
and runs ``python -m ctrlscope dashboard --check`` in it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_image_is_the_runtime_only():
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert user and re.fullmatch(r"[1-9]\d*(:\d+)?", user[-1]), f"USER must be a non-root UID (runAsNonRoot): {user}"
    assert re.search(r"^WORKDIR /app$", dockerfile, re.M) and "COPY manage.py" in dockerfile
    installs = re.findall(r"pip install ([^\n&]*)", dockerfile)
    assert installs == ["-r requirements.txt"], installs
    copied = {src for line in re.findall(r"^COPY (.+)$", dockerfile, re.M) for src in line.split()[:-1]}
    assert not copied & {".", "tests", "bench", "requirements-test.txt"}, copied
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*", ".dockerignore should be an allowlist: '*' first, then the '!' exceptions"
    assert not [line for line in ignore if line.startswith("!") and line.strip("!/").split("/")[0] in
                {"tests", "bench", "requirements-test.txt", ".venv", "go", "run"}]


def test_image_layout_runs(tmp_path):
    """What the Dockerfile copies, as the build context (.dockerignore) holds it, is a working /app:
    checked by assembling that tree (there is no Docker engine to build with) and running
    ``python -m ctrlscope dashboard --check`` in it."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    allowed = {line[1:].strip("/") for line in ignore if line.startswith("!")}
    excluded = [line.rstrip("/") for line in ignore[1:] if not line.startswith("!")]
    app = tmp_path / "app"
    app.mkdir()
    for line in re.findall(r"^COPY (.+)$", dockerfile, re.M):
        *sources, _ = line.split()
        for src in sources:
            assert src in allowed, f"the Dockerfile copies {src}, which .dockerignore leaves out of the context"
            if (ROOT / src).is_dir():
                shutil.copytree(ROOT / src, app / src, ignore=lambda d, names: [
                    n for n in names if any(Path(d, n).relative_to(ROOT).match(p) or
                                            Path(d, n).relative_to(ROOT).as_posix() == p for p in excluded)])
            else:
                shutil.copy2(ROOT / src, app / src)
    assert not (app / "protocol" / "vectors").exists() and not (app / "tests").exists()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE"}
           and not k.startswith("CTRLSCOPE_")}
    result = subprocess.run([sys.executable, "-m", "ctrlscope", "dashboard", "--check"], cwd=app,
                            env={**env, "CTRLSCOPE_SECRET_KEY": "image-layout-test-only"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    found = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    for what in ("templates", "static files", "protocol", "simulator protobuf schema", "run directory"):
        assert Path(found[what].strip()).is_relative_to(app), f"{what}: {found[what].strip()}"
