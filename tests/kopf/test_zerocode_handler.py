"""``ZeroCodeKopf`` fed the watch events real kopf operators produced (``tests/kopf/samples/``), in
order and at the wall times they arrived (a fake clock), compared with what the operators logged."""

from __future__ import annotations

import copy
import re

import pytest

from controllers.clock import FakeClock
from controllers.kopf.progress import DEFAULT_FORMAT, ProgressFormat, Storage, annotation_name
from controllers.kopf.zerocode import UNSEEN, KopfResource, ZeroCodeKopf
from controllers.schema import ErrorKind, HandlerProgress, ObservationMode, QueueOp, ReconcileResult
from tests.kopf.test_zerocode_progress import LONG_ID, sample
from tests.runtime.conftest import RecordingObserver

RESOURCE = KopfResource(group="demo.ctrlscope.dev", version="v1", plural="podsets", kind="PodSet", namespaced=True)
KEY = "default/web"

# What kopf logs for each attempt's outcome (kopf/_core/actions/execution.py).
LOGGED = [(re.compile(r"failed temporarily|will try again"), ReconcileResult.ERROR),
          (re.compile(r"failed permanently|will stop now|has timed out|has exceeded"), ReconcileResult.TERMINAL),
          (re.compile(r"succeeded\.$"), ReconcileResult.SUCCESS)]


def logged_attempts(run: dict) -> dict[str, list[ReconcileResult]]:
    out: dict[str, list[ReconcileResult]] = {}
    for line in run["operator_log"]:
        if "Handler '" not in line:
            continue
        handler = line.split("'")[1]
        out.setdefault(handler, []).extend(result for pattern, result in LOGGED if pattern.search(line))
    return out


def replay(events: list[dict], fmt: ProgressFormat = DEFAULT_FORMAT) -> RecordingObserver:
    observer = RecordingObserver()
    clock = FakeClock(start=0.0, wall_offset=events[0]["at"])
    handler = ZeroCodeKopf(RESOURCE, informer="demo.ctrlscope.dev/v1/PodSet", observer=observer, fmt=fmt, clock=clock)
    last = None
    for event in events:
        clock.step(event["at"] - clock.wall())
        obj = event["object"]
        if event["type"] == "ADDED":
            handler.on_add(obj)
        elif event["type"] == "MODIFIED":
            handler.on_update(last, obj)
        else:
            handler.on_delete(obj)
        last = obj
    return observer


def attempts(observer: RecordingObserver) -> dict[str, list[ReconcileResult]]:
    out: dict[str, list[ReconcileResult]] = {}
    for end in observer.of("on_reconcile_end"):
        out.setdefault(end["handler"], []).append(end["result"])
    return out


def last_progress(observer: RecordingObserver) -> dict[str, dict]:
    return {p["handler"]: p for p in observer.of("on_progress")}


def test_every_attempt_kopf_logged_is_seen_with_its_outcome():
    run = sample("zerocode-annotations.json")
    seen = attempts(replay(run["events"]))
    logged = logged_attempts(run)
    # kopf logs a parent's "sub-handlers unfinished" retry at debug level only; zero-code sees it.
    assert seen.pop("parent") == [ReconcileResult.REQUEUE_AFTER, ReconcileResult.SUCCESS]
    logged["scaled.spec.replicas"] = logged.pop("scaled/spec.replicas")
    logged[annotation_name(LONG_ID)] = logged.pop(LONG_ID)
    del logged["parent"]
    assert seen == logged
    assert seen["retrying"] == [ReconcileResult.ERROR, ReconcileResult.ERROR, ReconcileResult.SUCCESS]


def test_attempts_carry_retry_cause_error_kind_and_the_stored_delay():
    observer = replay(sample("zerocode-annotations.json")["events"])
    ends = [e for e in observer.of("on_reconcile_end") if e["handler"] == "retrying"]
    assert [e["retry"] for e in ends] == [0, 1, 2]
    assert [e["error_kind"] for e in ends] == [ErrorKind.TEMPORARY, ErrorKind.TEMPORARY, None]
    assert [e["error"] for e in ends] == ["not yet", "not yet", None]
    assert all(e["delay"] == pytest.approx(1.0, abs=0.1) for e in ends[:2]) and ends[2]["delay"] is None
    assert {e["cause"] for e in ends} == {"create"}
    starts = [s for s in observer.of("on_reconcile_start") if s["handler"] == "retrying"]
    assert [s["retry"] for s in starts] == [0, 1, 2]
    by_handler = {e["handler"]: e for e in observer.of("on_reconcile_end") if e["result"] != ReconcileResult.SUCCESS}
    assert by_handler["permanent"]["error_kind"] == ErrorKind.PERMANENT
    assert by_handler["limited"]["error_kind"] == ErrorKind.RETRIES
    assert by_handler["parent"]["error_kind"] == ErrorKind.CHILDREN
    assert by_handler["parent"]["requeue_after"] == by_handler["parent"]["delay"] > 0


def test_each_delayed_retry_is_a_countdown_on_the_queue_and_the_queue_ends_empty():
    observer = replay(sample("zerocode-annotations.json")["events"])
    queue = observer.of("on_queue")
    delayed = [e["delay"] for e in observer.of("on_reconcile_end") if e["delay"]]
    assert [q["delay"] for q in queue if q["op"] == QueueOp.ADD_AFTER] == delayed
    ops = [q["op"] for q in queue if q["op"] != QueueOp.ADD_AFTER]
    assert ops == [QueueOp.GET, QueueOp.DONE] * len(observer.of("on_reconcile_end"))


def test_handlers_end_as_kopf_left_them_succeeded_or_failed():
    observer = replay(sample("zerocode-annotations.json")["events"])
    final = last_progress(observer)
    states = {h: p["state"] for h, p in final.items()}
    assert states.pop("permanent") == states.pop("limited") == HandlerProgress.FAILED
    assert set(states.values()) == {HandlerProgress.SUCCEEDED}
    assert final["retrying"]["retries"] == 2  # failed attempts (kopf stores 3: it counts the success too)
    assert final["cleanup"]["cause"] == "delete"


def test_the_status_storage_run_reads_the_same_way():
    run = sample("zerocode-status.json")
    observer = replay(run["events"], ProgressFormat(storage=Storage.STATUS))
    assert attempts(observer) == logged_attempts(run)
    assert {h: p["state"] for h, p in last_progress(observer).items()} == {
        "retrying": HandlerProgress.SUCCEEDED, "second": HandlerProgress.SUCCEEDED}


def test_an_object_first_seen_with_progress_is_a_baseline_without_attempts():
    events = sample("zerocode-annotations.json")["events"]
    midway = next(i for i, e in enumerate(events) if "retrying" in str(e["object"]["metadata"].get("annotations")))
    # As when ctrlscope starts while kopf is at it: the initial LIST shows retrying after one attempt.
    observer = replay([dict(events[midway + 3], type="ADDED"), *events[midway + 4:]])
    hooks = [c[0] for c in observer.calls if c[0] != "on_controller"]
    baseline = hooks[:hooks.index("on_queue")]
    assert baseline and set(baseline) == {"on_progress"}  # stored progress, and no invented history
    retries = [e["retry"] for e in observer.of("on_reconcile_end") if e["handler"] == "retrying"]
    assert retries == [1, 2]  # its first attempt happened before ctrlscope looked


def test_states_the_watch_skipped_are_counted_as_merged_attempts():
    events = sample("zerocode-annotations.json")["events"]
    second = next(i for i, e in enumerate(events) if '"retries":2' in (e["object"]["metadata"].get("annotations") or {})
                  .get("kopf.zalando.org/retrying", ""))
    # As after a relist: the watch delivered the state before the first attempt and the one after the second.
    observer = replay([events[0], events[second]])
    ends = [e for e in observer.of("on_reconcile_end") if e["handler"] == "retrying"]
    assert [(e["retry"], e["error"]) for e in ends] == [(0, None), (1, "not yet")]


def test_records_dropped_without_a_new_diff_base_are_gone_not_succeeded():
    events = sample("zerocode-annotations.json")["events"]
    with_records = next(e for e in events if "retrying" in str(e["object"]["metadata"].get("annotations")))
    superseded = copy.deepcopy(with_records)
    superseded["object"]["metadata"]["annotations"] = {}  # purged, as a newer cause supersedes a cycle
    superseded["at"] += 0.1
    observer = replay([events[0], with_records, superseded])
    final = last_progress(observer)
    assert final and {p["state"] for p in final.values()} == {None}
    assert all(e["result"] != ReconcileResult.SUCCESS for e in observer.of("on_reconcile_end"))


def test_an_object_deleted_with_stored_progress_drops_its_handlers():
    events = sample("zerocode-annotations.json")["events"]
    with_records = next(e for e in events if "retrying" in str(e["object"]["metadata"].get("annotations")))
    deleted = dict(copy.deepcopy(with_records), type="DELETED", at=with_records["at"] + 0.1)
    observer = replay([events[0], with_records, deleted])
    assert {p["state"] for p in last_progress(observer).values()} == {None}


def test_the_controller_says_it_is_observed_from_outside_and_what_that_cannot_see():
    observer = RecordingObserver()
    handler = ZeroCodeKopf(RESOURCE, informer="demo.ctrlscope.dev/v1/PodSet", observer=observer)
    handler.start()
    described = observer.of("on_controller")[-1]
    assert observer.calls[-1][1] == ("kopf/podsets.demo.ctrlscope.dev",)
    assert described == {"watches": ["demo.ctrlscope.dev/v1/PodSet"], "workers": 0, "started": True,
                         "mode": ObservationMode.ZERO_CODE, "unseen": list(UNSEEN)}
