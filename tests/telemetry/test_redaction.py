"""Redaction: Secret values and the manifest kubectl apply leaves in an annotation never leave the
worker; what is left still shows which values changed."""

from __future__ import annotations

import orjson

from controllers.telemetry.redaction import LAST_APPLIED, REDACTED, redact

CLEAR = "hunter2"
ENCODED = "aHVudGVyMg=="


def secret(uid: str = "uid-s", pw: str = ENCODED, token: str = CLEAR) -> dict:
    applied = orjson.dumps({"kind": "Secret", "data": {"pw": pw}, "stringData": {"token": token}}).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "s", "namespace": "default", "uid": uid, "resourceVersion": "7",
                         "annotations": {LAST_APPLIED: applied, "team": "db"},
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:pw": {}}}}]},
            "data": {"pw": pw}, "stringData": {"token": token}}


def test_secret_values_and_last_applied_are_redacted_and_the_input_is_untouched():
    original = secret()
    out = redact(original)
    blob = orjson.dumps(out)
    assert b"aHVudGVyMg" not in blob and b"hunter2" not in blob
    assert set(out["data"]) == {"pw"} and set(out["stringData"]) == {"token"}
    assert out["data"]["pw"].startswith(f"{REDACTED} (12 chars, #")
    assert out["metadata"]["annotations"][LAST_APPLIED].startswith(REDACTED)
    assert out["metadata"]["annotations"]["team"] == "db" and out["type"] == "Opaque"
    assert out["metadata"]["managedFields"] == original["metadata"]["managedFields"]  # names, no values
    assert original == secret(), "the cached object must not be modified"


def test_non_secrets_pass_through_unchanged():
    pod = {"kind": "Pod", "metadata": {"name": "p", "annotations": {LAST_APPLIED: "{}"}}, "data": {"x": "1"}}
    assert redact(pod) is pod


def test_the_fingerprint_changes_with_the_value_and_differs_between_secrets():
    before, same, after = redact(secret()), redact(secret()), redact(secret(pw="c2VjcmV0Mg=="))
    assert before == same, "a redacted object is stable while nothing changes"
    assert after["data"]["pw"] != before["data"]["pw"], "a changed value must show in a diff"
    assert after["stringData"] == before["stringData"]
    assert after["metadata"]["annotations"][LAST_APPLIED] != before["metadata"]["annotations"][LAST_APPLIED]
    other = redact(secret(uid="uid-other"))
    assert other["data"]["pw"] != before["data"]["pw"], "equal values in two Secrets must not look equal"


def test_malformed_secret_fields_are_hidden_whole():
    out = redact({"kind": "Secret", "metadata": {}, "data": ["aHVudGVyMg=="]})
    assert b"aHVudGVyMg" not in orjson.dumps(out) and out["data"].startswith(REDACTED)
