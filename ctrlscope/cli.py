"""``ctrlscope``: one command for every ctrlscope process, installed by ``pip install .``.

Each subcommand but two is a Django management command (``dashboard/management/commands/``, and
Django's ``migrate``) run with ``dashboard.settings``, so ``ctrlscope worker ...`` is exactly
``python manage.py runcontrollers ...`` in a checkout; ``ctrlscope SUB --help`` is that command's
help. ``dashboard`` runs daphne on ``dashboard.asgi:application``, as the Makefile's demo, the
Dockerfile and the manifests do; ``manage`` runs any other management command.

Settings come from the environment as for ``manage.py`` (README, Configuration); outside a checkout
the run directory (logs, pid files, the simulator's kubeconfig, the default SQLite database) is
``CTRLSCOPE_RUN_DIR``, else ``$XDG_STATE_HOME/ctrlscope`` (``~/.local/state/ctrlscope``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

ASGI_APP = "dashboard.asgi:application"

# subcommand: (the management command it runs, or None when it is not one; what it does)
COMMANDS: dict[str, tuple[str | None, str]] = {
    "demo": ("demo", "everything on loopback: Redis, the simulated cluster, the example controllers, the dashboard"),
    "dashboard": (None, "the dashboard under daphne (--host, --port, --migrate; --check verifies the installation)"),
    "worker": ("runcontrollers", "a worker: controllers (--controller MODULE:NAME) or kopf resources, published to Redis"),
    "simcluster": ("simcluster", "the simulated Kubernetes API server"),
    "faultproxy": ("faultproxy", "a fault proxy: the simulator's faults on any cluster (clients use its --kubeconfig)"),
    "realcluster": ("realcluster", "a real Kubernetes control plane on loopback, built from upstream (needs Go and a checkout)"),
    "kopf": ("runkopf", "a kopf operator, unmodified, in-process (ctrlscope kopf [options] -- <kopf run arguments>)"),
    "record": ("record", "save live telemetry to a file"),
    "replay": ("replay", "play a recording into the dashboard"),
    "scenario": ("scenario", "run a guided scenario against the simulated cluster"),
    "samples": ("samples", "create the demo's sample Deployments and PodSets (default: in the simulated cluster)"),
    "migrate": ("migrate", "create or update the database (users, sessions)"),
    "createuser": ("createuser", "create or update a dashboard user (a viewer, or an operator with --role operator)"),
    "manage": (None, "any other Django management command (ctrlscope manage shell, ctrlscope manage help, ...)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: ctrlscope COMMAND [ARGS ...]", "",
             "Watch Kubernetes controllers work, live. Commands (ctrlscope COMMAND --help for each):", ""]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "Settings come from the environment (CTRLSCOPE_SECRET_KEY, REDIS_URL, DATABASE_URL, ...; see the README).",
              f"ctrlscope --version prints the version ({_version()})."]
    return "\n".join(lines) + "\n"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctrlscope")
    except PackageNotFoundError:
        return "not installed: running from a checkout"


def _asks_for_help(args: Sequence[str]) -> bool:
    """Whether ``args`` (before a ``--``: after it they are another program's) ask for help."""
    own = list(args)[: list(args).index("--")] if "--" in args else args
    return any(a in ("-h", "--help") for a in own)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write(usage())
        return 2
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage())
        return 0
    if args[0] == "--version":
        print(f"ctrlscope {_version()}")
        return 0
    sub, rest = args[0], args[1:]
    if sub not in COMMANDS:
        sys.stderr.write(f"ctrlscope: unknown command {sub!r}\n\n{usage()}")
        return 2
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    if _asks_for_help(rest):
        # Help needs the settings loaded (the commands' defaults read them), not a secret key.
        os.environ.setdefault("CTRLSCOPE_DEMO", "1")
    if sub == "dashboard":
        return dashboard(rest)
    if sub == "manage":
        from django.core.management import execute_from_command_line

        execute_from_command_line(["ctrlscope manage", *rest])
        return 0
    return _management(COMMANDS[sub][0] or sub, sub, rest)


def _setup() -> None:
    """``django.setup()``; a settings error is one line on stderr and exit status 2, not a traceback."""
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"ctrlscope: {exc}\n")
        raise SystemExit(2) from None
    from django.conf import settings

    # The run directory and a SQLite database's directory, made on first use (a per-user default
    # outside a checkout does not exist yet); where they cannot be made, the command says so itself.
    db = settings.DATABASES["default"]
    sqlite_dir = [Path(db["NAME"]).parent] if db["ENGINE"].endswith("sqlite3") and str(db["NAME"]) else []
    for directory in (Path(settings.RUN_DIR), *sqlite_dir):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass


def _management(name: str, sub: str, rest: list[str]) -> int:
    """Run management command ``name`` as ``ctrlscope SUB``: its usage line says ``ctrlscope SUB``."""
    _setup()
    from django.core.management import get_commands, load_command_class
    from django.core.management.base import BaseCommand

    app = get_commands()[name]
    command = app if isinstance(app, BaseCommand) else load_command_class(app, name)
    command.run_from_argv(["ctrlscope", sub, *rest])  # exits non-zero itself on a CommandError
    return 0


def dashboard(args: list[str]) -> int:
    own, daphne_args = (args[: args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    parser = argparse.ArgumentParser(
        prog="ctrlscope dashboard",
        description=f"Serve the dashboard with daphne ({ASGI_APP}). Arguments after -- go to daphne "
                    "(e.g. -- --proxy-headers).")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("CTRLSCOPE_PORT", "8000")),
                        help="port (default $CTRLSCOPE_PORT or 8000)")
    parser.add_argument("--migrate", action="store_true", help="create or update the database first")
    parser.add_argument("--check", action="store_true",
                        help="run Django's checks, print where the templates, static files and protocol files are "
                             "loaded from, and exit")
    opts = parser.parse_args(own)
    if opts.check:
        _setup()
        return check()
    if opts.migrate:
        _setup()
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=1)
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(["-b", opts.host, "-p", str(opts.port), *daphne_args, ASGI_APP])
    return 0


def check() -> int:
    """Django's system checks, then every file the processes load at runtime, found where they run
    from (in an installed package: inside it). Non-zero when one is missing."""
    from django.conf import settings
    from django.contrib.staticfiles import finders
    from django.core.management import call_command
    from django.template.loader import get_template

    call_command("check")  # raises SystemCheckError (non-zero exit) on errors
    found: dict[str, Path | None] = {}
    found["templates"] = Path(get_template("dashboard/base.html").origin.name).parent.parent
    static = finders.find("dashboard/app.js")
    found["static files"] = Path(static).parent.parent if static else None
    from controllers.sim import protobuf
    from controllers.telemetry import streams

    found["protocol"] = streams.FRAME_SCRIPT_FILE.parent
    found["simulator protobuf schema"] = protobuf.SCHEMA_FILE if protobuf.SCHEMA_FILE.is_file() else None
    missing = [what for what, path in found.items() if path is None]
    for what, path in found.items():
        print(f"{what + ':':<27} {path or 'MISSING'}")
    print(f"{'run directory:':<27} {settings.RUN_DIR}")
    db = settings.DATABASES["default"]
    print(f"{'database:':<27} {db['ENGINE'].rsplit('.', 1)[-1]} {db['NAME']}")
    if missing:
        sys.stderr.write(f"ctrlscope: not found: {', '.join(missing)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
