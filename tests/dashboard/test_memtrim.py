"""daphne gives freed memory back (dashboard/memtrim.py): the setting, the trimmer's thread, and on
this machine's glibc that a trim takes a fragmented heap's free pages out of the RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from dashboard import memtrim
from tests.conftest import ROOT


@pytest.mark.parametrize(("raw", "want"), [(None, 10.0), ("", 10.0), (" 2.5 ", 2.5), ("0", 0.0), ("30", 30.0)])
def test_the_interval_comes_from_the_environment(raw, want):
    env = {} if raw is None else {memtrim.ENV: raw}
    assert memtrim.interval_from_env(env) == want


@pytest.mark.parametrize("raw", ["ten", "-1", "nan", "inf", "1s"])
def test_a_bad_interval_is_a_clear_error_naming_the_variable(raw):
    with pytest.raises(ValueError, match=rf"^CTRLSCOPE_MALLOC_TRIM_S='{raw}': expected"):
        memtrim.interval_from_env({memtrim.ENV: raw})


def test_a_bad_interval_stops_the_dashboard_from_starting():
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", memtrim.ENV: "often"}
    done = subprocess.run([sys.executable, "-c", "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'dashboard.settings';"
                           " from django.conf import settings; settings.INSTALLED_APPS"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "ImproperlyConfigured: CTRLSCOPE_MALLOC_TRIM_S='often': expected" in done.stderr


def test_the_trimmer_trims_every_interval_until_stopped():
    waits: list[float] = []
    stop_after = 3
    done = threading.Event()

    def wait(seconds: float) -> bool:  # the clock: three intervals pass, then it is told to stop
        waits.append(seconds)
        if len(waits) > stop_after:
            done.set()
            return True
        return False

    answers = iter([1, 0, 1])
    trimmer = memtrim.MallocTrimmer(7.0, lambda: next(answers), wait=wait).start()
    assert done.wait(10)
    trimmer.stop()
    assert waits == [7.0] * (stop_after + 1)
    assert (trimmer.trims, trimmer.released) == (3, 2)


def test_a_failing_trim_ends_the_thread_not_the_process(caplog):
    def boom() -> int:
        raise OSError("no")

    trimmer = memtrim.MallocTrimmer(0.001, boom).start()
    trimmer._thread.join(10)
    assert not trimmer._thread.is_alive() and trimmer.trims == 0
    assert "malloc_trim failed" in caplog.text
    with pytest.raises(ValueError):
        memtrim.MallocTrimmer(0, boom)


FRAGMENT = r"""
import json, random
from dashboard import memtrim

def rss_mib():
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith('VmRSS'))

random.seed(1)
frames = [bytes(random.randint(1000, 60000)) for _ in range(4000)]  # ~120 MB of frame-sized blocks
del frames[::2]  # every other one freed: the heap's top stays live, so glibc keeps the pages
held = rss_mib()
trim = memtrim.libc_malloc_trim()
gave_back = trim()
print(json.dumps({"held": held, "after": rss_mib(), "gave_back": gave_back}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or memtrim.libc_malloc_trim() is None,
                    reason="malloc_trim is glibc's")
def test_a_trim_gives_a_fragmented_heaps_free_pages_back():
    done = subprocess.run([sys.executable, "-c", FRAGMENT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["gave_back"] == 1
    # Half of ~120 MB was freed; glibc held it until the trim.
    assert out["held"] - out["after"] > 30, out


def test_the_asgi_application_starts_one_trimmer():
    code = ("import os, json; os.environ['DJANGO_SETTINGS_MODULE'] = 'dashboard.settings'\n"
            "import dashboard.asgi\n"
            "from dashboard import memtrim\n"
            "t = memtrim._started\n"
            "print(json.dumps({'interval': t and t.interval, 'alive': bool(t and t._thread.is_alive()),"
            " 'same': memtrim.start(5) is t}))")
    for env, want in (({}, 10.0), ({memtrim.ENV: "3"}, 3.0), ({memtrim.ENV: "0"}, None)):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "CTRLSCOPE_DEMO": "1", **env})
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        if want is None:
            assert out == {"interval": None, "alive": False, "same": False}
        else:
            assert out == {"interval": want, "alive": True, "same": True}
