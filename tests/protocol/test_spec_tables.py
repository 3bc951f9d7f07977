"""protocol/README.md and protocol/schema/ agree with controllers/schema.py, the one definition."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import orjson
import pytest

from controllers import schema
from tests.protocol import vectors

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol"
README = (PROTOCOL / "README.md").read_text()


def readme_table(section: str) -> list[str]:
    """The first-column values (in backticks) of the table under ``### {section}``."""
    m = re.search(rf"^### {re.escape(section)}\n(.*?)(?=^#)", README, re.M | re.S)
    assert m, f"protocol/README.md has no section ### {section}"
    return re.findall(r"^\| `([^`]+)` \|", m.group(1), re.M)


@pytest.mark.parametrize("name", sorted(schema.VOCABULARY))
def test_every_enum_has_its_table_with_exactly_its_values_in_order(name):
    assert readme_table(name) == [m.value for m in schema.VOCABULARY[name]]


def test_the_readme_states_the_version_the_code_publishes():
    assert README.startswith(f"# ctrlscope telemetry protocol, version {schema.PROTOCOL_VERSION}\n")


def test_the_current_version_is_stated_once():
    """Only the title says which version is current; elsewhere a version is history ("1.4 added",
    "v1.4:" marks). A "now 1.1" or a frame example "here 1.0" drifted from the code before."""
    current = re.compile(r"\b(?:version|now|here|currently|speaks)\W{1,3}v?\d+\.\d+", re.I)
    for path in (PROTOCOL / "README.md", PROTOCOL / "redis-layout.md", PROTOCOL / "vectors" / "README.md",
                 PROTOCOL.parent / "README.md"):
        found = current.findall(path.read_text())
        assert found == (["version 1." + str(schema.PROTOCOL_MINOR)] if path.name == "README.md"
                         and path.parent == PROTOCOL else []), (path, found)


def test_every_record_kind_has_a_json_schema_and_nothing_else_does():
    files = {p.name.removesuffix(".schema.json") for p in (PROTOCOL / "schema" / "records").glob("*.schema.json")}
    assert files == {k.value for k in schema.RecordKind}


# Which enum each closed-set field of a record takes.
FIELD_ENUMS = {("watch", "type"): schema.WatchEventType, ("watch_end", "reason"): schema.WatchEndReason,
               ("state", "state"): schema.ReflectorState, ("fifo", "op"): schema.FifoOp,
               ("fifo", "delta"): schema.DeltaType, ("handler", "event"): schema.HandlerEvent,
               ("handler", "outcome"): schema.HandlerOutcome, ("queue", "op"): schema.QueueOp,
               ("event", "event"): schema.ControllerEvent, ("reconcile", "result"): schema.ReconcileResult,
               ("log", "level"): schema.LogLevel, ("progress", "state"): schema.HandlerProgress,
               ("reconcile", "error_kind"): schema.ErrorKind, ("write", "refused"): schema.WriteRefusal,
               ("watcher", "variant"): schema.WatcherVariant, ("finding", "finding"): schema.FindingKind}


def test_record_schemas_enumerate_the_schema_modules_values():
    seen = set()
    for path in (PROTOCOL / "schema" / "records").glob("*.schema.json"):
        doc = json.loads(path.read_text())
        kind = doc["properties"]["k"]["const"]
        for field, spec in doc["properties"].items():
            if "enum" in spec and (kind, field) in FIELD_ENUMS:
                # (a nullable field lists null last: "not set")
                assert [v for v in spec["enum"] if v is not None] == [m.value for m in FIELD_ENUMS[kind, field]], \
                    (kind, field)
                seen.add((kind, field))
    assert seen == set(FIELD_ENUMS)


def test_the_trigger_schema_enumerates_the_trigger_kinds():
    doc = json.loads((PROTOCOL / "schema" / "records" / "reconcile_start.schema.json").read_text())
    trigger = doc["properties"]["triggers"]["items"]["properties"]
    assert trigger["kind"]["enum"] == [m.value for m in schema.TriggerKind]
    assert trigger["type"]["enum"] == [m.value for m in schema.ControllerEvent]
    assert trigger["result"]["enum"] == sorted(schema.RETRIED_RESULTS, key=list(schema.ReconcileResult).index)
    assert doc["properties"]["triggers"]["maxItems"] == schema.TRIGGERS_MAX


def _validators():
    frame = jsonschema.Draft202012Validator(json.loads((PROTOCOL / "schema" / "frame.schema.json").read_text()))
    records = {p.name.removesuffix(".schema.json"): jsonschema.Draft202012Validator(json.loads(p.read_text()))
               for p in (PROTOCOL / "schema" / "records").glob("*.schema.json")}
    return frame, records


@pytest.mark.parametrize(("path", "vector"), vectors.load("encode"), ids=[p.stem for p, _ in vectors.load("encode")])
def test_every_frame_the_encoder_vectors_expect_is_valid(path, vector):
    frame_validator, record_validators = _validators()
    for frames in vector["frames"].values():
        for frame in frames:
            frame_validator.validate(frame)
            for record in frame["r"]:
                record_validators[record["k"]].validate(record)


def test_the_schemas_reject_what_readers_could_not_read(redis_url, prefix):
    frame_validator, record_validators = _validators()
    good = {"r": [], "v": "1.0", "ts": 1.0, "src": "p", "seq": 1}
    frame_validator.validate(good)
    for bad in ({**good, "v": "one"}, {**good, "seq": 0}, {**good, "reset": True, "s": {}}, {"r": [], "ts": 1.0}):
        with pytest.raises(jsonschema.ValidationError):
            frame_validator.validate(bad)
    with pytest.raises(jsonschema.ValidationError):
        record_validators["queue"].validate({"k": "queue", "ts": 1.0, "op": "teleport", "key": "a", "depth": 0})
    assert orjson.loads(orjson.dumps(good)) == good


def test_the_informer_scope_table_lists_the_fields_in_order():
    assert readme_table("InformerScope") == list(schema.INFORMER_SCOPE_FIELDS)
    record = json.loads((PROTOCOL / "schema" / "records" / "informer.schema.json").read_text())
    assert set(schema.INFORMER_SCOPE_FIELDS) <= set(record["properties"])
