"""``controllers.kopf.progress`` on what real kopf stored: the samples in ``tests/kopf/samples/`` are the
watch events of PodSets handled by plain kopf operators (``capture_zerocode.py`` records them, with
the operators' own log lines about what really happened)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from controllers.kopf.progress import (
    DEFAULT_PREFIX,
    ProgressFormat,
    Storage,
    annotation_name,
    diff_base,
    failure_kind,
    foreign_prefixes,
    legacy_annotation_name,
    parse_time,
    read_progress,
    retry_kind,
    safe_name,
)
from controllers.schema import ErrorKind, HandlerCause, HandlerProgress

SAMPLES = Path(__file__).parent / "samples"
LONG_ID = "a_really_long_handler_identifier_that_needs_hashing_for_sure_yes_indeed"
MEDIUM_ID = "a_medium_length_handler_id_of_fifty_chars_xxxxyyyy"


def sample(name: str) -> dict:
    return json.loads((SAMPLES / name).read_text())


@pytest.fixture(scope="module")
def annotations_run() -> dict:
    return sample("zerocode-annotations.json")


@pytest.fixture(scope="module")
def status_run() -> dict:
    return sample("zerocode-status.json")


def objects(run: dict) -> list[dict]:
    return [e["object"] for e in run["events"]]


def stored_keys(run: dict) -> set[str]:
    return {k for o in objects(run) for k in (o["metadata"].get("annotations") or {})}


def test_every_handler_kopf_logged_is_read_once_under_its_id(annotations_run):
    seen = {h for o in objects(annotations_run) for h in read_progress(o)}
    logged = {line.split("'")[1] for line in annotations_run["operator_log"] if "Handler '" in line}
    # Ids that fit an annotation name read back as themselves, sub-handlers through their parent's
    # subrefs; the two ids that cannot: a field handler (its "/" is stored as ".") and one longer
    # than 63 characters (stored cut and hashed).
    assert seen == (logged - {"scaled/spec.replicas", LONG_ID}) | {"scaled.spec.replicas", annotation_name(LONG_ID)}


def test_kopfs_two_key_names_for_one_handler_read_as_one_handler(annotations_run):
    keys = stored_keys(annotations_run)
    for handler_id in (LONG_ID, MEDIUM_ID):
        # kopf really wrote both names (the name functions say which), with the same value ...
        twins = {f"{DEFAULT_PREFIX}/{annotation_name(handler_id)}",
                 f"{DEFAULT_PREFIX}/{legacy_annotation_name(safe_name(handler_id), DEFAULT_PREFIX)}"}
        assert len(twins) == 2 and twins <= keys
        # ... and they are read as one handler.
        for obj in objects(annotations_run):
            names = [h for h in read_progress(obj) if h.startswith(handler_id[:30])]
            assert len(names) <= 1


def test_a_sub_handler_is_named_by_its_parents_subrefs_and_makes_the_parent_wait(annotations_run):
    waiting = next(read_progress(o) for o in objects(annotations_run) if "parent/child" in read_progress(o))
    parent, child = waiting["parent"], waiting["parent/child"]
    assert f"{DEFAULT_PREFIX}/parent.child" in stored_keys(annotations_run)
    assert parent.subrefs == ("parent/child",)
    assert child.state(child.delayed - 0.5) == HandlerProgress.RETRYING and child.message == "child wait"
    assert retry_kind(parent, waiting) == ErrorKind.CHILDREN
    assert parent.error() is None  # kopf's internal "children" retry stores a meaningless text


def test_states_follow_the_stored_fields(annotations_run):
    first = next(read_progress(o) for o in objects(annotations_run) if read_progress(o))
    retrying, pending = first["retrying"], first["permanent"]
    now = retrying.started
    assert (retrying.state(now), retrying.retries, retrying.message) == (HandlerProgress.RETRYING, 1, "not yet")
    assert retrying.delayed - retrying.started == pytest.approx(1.0, abs=0.05)  # TemporaryError(delay=1)
    assert retrying.cause == HandlerCause.CREATE
    assert retry_kind(retrying, first) == ErrorKind.TEMPORARY
    assert (pending.state(now), pending.retries, pending.delayed) == (HandlerProgress.PENDING, 0, None)
    final = [read_progress(o) for o in objects(annotations_run)]
    failed = next(v["permanent"] for v in final if v.get("permanent") and v["permanent"].failure)
    assert (failed.state(now), failed.retries, failed.message) == (HandlerProgress.FAILED, 1, "never")
    assert failure_kind(failed) == ErrorKind.PERMANENT
    given_up = next(v["limited"] for v in final if v.get("limited") and v["limited"].failure)
    assert failure_kind(given_up) == ErrorKind.RETRIES and given_up.retries == 2
    succeeded = next(v["retrying"] for v in reversed(final) if v.get("retrying"))
    # The last stored state of a handler that succeeded on its third attempt: its success was never
    # stored -- kopf purged the records in the patch that ended the cycle.
    assert (succeeded.state(now), succeeded.retries) == (HandlerProgress.RETRYING, 2)


def test_a_cycle_ends_where_the_records_vanish_and_the_diff_base_is_written(annotations_run):
    states = [(bool(read_progress(o)), diff_base(o) is not None) for o in objects(annotations_run)]
    end = next(i for i, (records, _) in enumerate(states) if i and states[i - 1][0] and not records)
    assert states[end - 1] == (True, False) and states[end] == (False, True)  # one patch, both changes


def test_an_update_handler_and_a_delete_handler_store_their_purpose(annotations_run):
    causes = {(h, v.cause) for o in objects(annotations_run) for h, v in read_progress(o).items()
              if v.cause != HandlerCause.CREATE}
    assert causes == {("scaled.spec.replicas", HandlerCause.UPDATE), ("cleanup", HandlerCause.DELETE)}


def test_the_touch_and_the_diff_base_annotations_are_not_handlers(annotations_run):
    keys = stored_keys(annotations_run)
    assert {f"{DEFAULT_PREFIX}/touch-dummy", f"{DEFAULT_PREFIX}/last-handled-configuration"} <= keys
    handlers = {h for o in objects(annotations_run) for h in read_progress(o)}
    assert not handlers & {"touch-dummy", "last-handled-configuration"}


def test_status_storage_is_read_by_status_and_both_but_not_by_annotations(status_run):
    by = {storage: [read_progress(o, ProgressFormat(storage=storage)) for o in objects(status_run)]
          for storage in Storage}
    assert any(by[Storage.STATUS]) and by[Storage.BOTH] == by[Storage.STATUS]
    assert not any(by[Storage.ANNOTATIONS])
    assert {h for views in by[Storage.STATUS] for h in views} == {"retrying", "second"}


def test_with_status_storage_the_diff_base_comes_one_patch_before_the_purge(status_run):
    fmt = ProgressFormat(storage=Storage.STATUS)
    states = [(bool(read_progress(o, fmt)), diff_base(o, fmt) is not None) for o in objects(status_run)]
    first_base = states.index((True, True))
    assert states[first_base + 1] == (False, True)


def test_annotation_storage_on_an_operator_with_status_storage_or_another_prefix_sees_nothing(
        annotations_run, status_run):
    assert not any(read_progress(o, ProgressFormat(storage=Storage.ANNOTATIONS)) for o in objects(status_run))
    other = ProgressFormat(prefix="example.com")
    assert not any(read_progress(o, other) for o in objects(annotations_run))
    assert set().union(*(foreign_prefixes(o, other) for o in objects(annotations_run))) == {DEFAULT_PREFIX}
    assert not any(foreign_prefixes(o) for o in objects(annotations_run))


def test_kopf_timestamps_with_and_without_an_offset_are_utc():
    assert parse_time("2026-12-01T20:48:32.994239+00:00") == parse_time("2026-12-01T20:48:32.994239")
    assert parse_time("not a time") is None and parse_time(None) is None


def test_a_future_delay_without_a_stored_attempt_is_a_retry(annotations_run):
    view = next(v for o in objects(annotations_run) for v in read_progress(o).values() if v.delayed)
    scheduled = replace(view, retries=0)
    assert scheduled.state(view.delayed - 1) == HandlerProgress.RETRYING
    assert scheduled.state(view.delayed + 1) == HandlerProgress.PENDING
