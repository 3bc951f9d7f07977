"""PostgreSQL (Debian's) as the dashboard's database: migrations, login, roles, shared sessions.

A private cluster in a temporary directory (``initdb`` and ``pg_ctl`` from
``/usr/lib/postgresql/*/bin``, run as the ``postgres`` user, or ``nobody``, when the test runs as
root: the server refuses root) listening on a free loopback port, password authentication over
TCP. ``DATABASE_URL=postgres://ctrlscope:<password>@127.0.0.1:<port>/ctrlscope`` (the password has
characters that must be URL-quoted) is all the dashboard is told: ``manage.py migrate``, a viewer
and an operator created with ``manage.py shell``, then two daphne replicas on that database. A user
signs in on one replica and the other knows the session; a viewer reads and gets 403 on operator
actions, an operator is let through; the users and sessions are rows in PostgreSQL, and no SQLite
file was written.
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from controllers.process import stop_process
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import free_port
from tests.conftest import ROOT, DashboardServer, wait_until
from tests.dashboard.conftest import CREATE_USERS, login

PASSWORD = "pg s3cret/p@ss:w0rd%"  # a space, '/', '@', ':' and '%': each must be quoted in the URL


def pg_bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", p)])
    if found:
        return Path(found[-1]).parent
    if os.environ.get("CI"):
        pytest.fail("PostgreSQL is missing in CI: .ci/run should have installed Debian's postgresql")
    pytest.skip("PostgreSQL not installed (apt-get install postgresql); .ci/run installs it")


def as_owner(argv: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *argv] if owner else argv


@pytest.fixture
def postgres():
    """A private PostgreSQL cluster: yields (DATABASE_URL, connection kwargs); stopped and removed after."""
    bindir = pg_bindir()
    try:
        import psycopg  # noqa: F401 -- the driver Django's backend needs, pinned in requirements.txt
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("psycopg is missing: pip install -r requirements.txt")
        pytest.skip("psycopg not installed: pip install -r requirements.txt")
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        try:
            pwd.getpwnam(owner)
        except KeyError:
            owner = "nobody"
    # Not under pytest's tmp_path: its parents are root's, mode 0700, which the server's user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="ctrlscope-pg-"))
    data = base / "data"
    pwfile = base / "pwfile"
    pwfile.write_text(PASSWORD + "\n")
    if owner:
        user = pwd.getpwnam(owner)
        for path in (base, pwfile):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = free_port()
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    started = False
    try:
        init = subprocess.run(as_owner([str(bindir / "initdb"), "-D", str(data), "-U", "ctrlscope", f"--pwfile={pwfile}",
                                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale",
                                        "--no-sync"], owner),
                              cwd=base, env=env, capture_output=True, text=True, timeout=120)
        assert init.returncode == 0, f"initdb failed:\n{init.stdout}\n{init.stderr}"
        opts = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={base} -c fsync=off"
        start = subprocess.run(as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"),
                                         "-w", "-t", "60", "-o", opts, "start"], owner),
                               cwd=base, env=env, capture_output=True, text=True, timeout=90)
        started = True
        log = (base / "server.log").read_text(errors="replace") if (base / "server.log").exists() else ""
        assert start.returncode == 0, f"pg_ctl start failed:\n{start.stdout}\n{start.stderr}\n{log[-2000:]}"
        created = subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "ctrlscope",
                                  "ctrlscope"], env={**env, "PGPASSWORD": PASSWORD},
                                 capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, f"createdb failed:\n{created.stderr}"
        url = f"postgres://ctrlscope:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/ctrlscope"
        yield url, {"host": "127.0.0.1", "port": port, "user": "ctrlscope", "password": PASSWORD, "dbname": "ctrlscope"}
    finally:
        if started:
            subprocess.run(as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], owner),
                           cwd=base, env=env, capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def post(session: requests.Session, server: DashboardServer, path: str) -> requests.Response:
    return session.post(server.url + path, timeout=15,
                        headers={"X-CSRFToken": session.cookies.get("csrftoken", ""), "Referer": server.url + "/"})


def test_postgres_migrations_login_roles_and_sessions_shared_by_replicas(postgres, redis_url, prefix, tmp_path):
    import psycopg

    url, conninfo = postgres
    sqlite = tmp_path / "must-not-exist.sqlite3"
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "DATABASE_URL": url, "CTRLSCOPE_DB": str(sqlite),
           "CTRLSCOPE_RUN_DIR": str(tmp_path)}
    began = time.monotonic()
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=180)
    assert migrate.returncode == 0, f"migrate on PostgreSQL failed:\n{migrate.stdout}\n{migrate.stderr}"
    migrated = time.monotonic()
    users = subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USERS], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert users.returncode == 0, users.stderr

    servers: list[DashboardServer] = [
        DashboardServer(redis_url, prefix, sqlite, tmp_path, DATABASE_URL=url, CTRLSCOPE_ALLOW_ANONYMOUS="0",
                        CTRLSCOPE_SIM_KUBECONFIG="") for _ in range(2)]
    stopped = RedisPublisher(redis_url, prefix=prefix)  # a stopped worker an operator may forget
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(DashboardServer.start, servers))
        a, b = servers
        stopped.describe(role="worker", name="old")
        stopped.set_state("w/old/components", "worker/old", {"kind": "worker"})
        stopped.start()
        wait_until(lambda: stopped.frames_published >= 1, timeout=10, what="the worker to publish")
        stopped.stop()

        anonymous = requests.get(a.url + "/", timeout=10, allow_redirects=False)
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous.headers["Location"]

        viewer = login(a, "viewer")  # signed in on one replica...
        for server in servers:  # ...and known on both: the session is a row in PostgreSQL
            page = viewer.get(server.url + "/", timeout=10, allow_redirects=False)
            assert page.status_code == 200, f"{server.url}: {page.status_code}"
            assert viewer.get(server.url + "/presence.json", timeout=10).status_code == 200
        refused = post(viewer, b, "/workers/old/forget")
        assert refused.status_code == 403 and "operators only" in refused.json()["error"]
        refused = post(viewer, a, "/cluster/faults/drop-watches")
        assert refused.status_code == 403 and "operators only" in refused.json()["error"]

        op = login(b, "op")
        allowed = post(op, a, "/cluster/faults/drop-watches")  # past the role check: no simulator here
        assert allowed.status_code == 409 and "fault injection is off" in allowed.json()["error"], allowed.text
        done = post(op, a, "/workers/old/forget")
        assert done.status_code == 200 and done.json()["by"] == "op", done.text
        assert "worker old forgotten by op" in a.log.read_text()

        with psycopg.connect(**conninfo) as conn:
            names = {r[0] for r in conn.execute("SELECT username FROM auth_user")}
            operators = {r[0] for r in conn.execute(
                "SELECT u.username FROM auth_user u JOIN auth_user_groups ug ON ug.user_id = u.id"
                " JOIN auth_group g ON g.id = ug.group_id WHERE g.name = 'operators'")}
            sessions = conn.execute("SELECT count(*) FROM django_session WHERE expire_date > now()").fetchone()[0]
            applied = conn.execute("SELECT count(*) FROM django_migrations").fetchone()[0]
        assert names == {"viewer", "op"} and operators == {"op"}
        assert sessions >= 2, f"{sessions} session rows: the logins did not land in PostgreSQL"
        assert applied > 10
        assert not sqlite.exists(), "a SQLite database was written although DATABASE_URL names PostgreSQL"
        print(f"\nPostgreSQL: migrate {migrated - began:.1f} s ({applied} migrations), 2 replicas, "
              f"{sessions} sessions shared; total {time.monotonic() - began:.1f} s")
    finally:
        stopped.stop()
        for server in servers:
            stop_process(server.proc)
