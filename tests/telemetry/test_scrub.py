"""SecretScrubber: a cached Secret's values are masked in every outgoing string, in every form the
worker knows (decoded, base64 padded and unpadded, JSON-escaped), and nothing else changes."""

from __future__ import annotations

import base64

import orjson
import pytest

from controllers.telemetry.scrub import SecretScrubber

PASSWORD = 'hunter2-"quoted"\\pw'
TOKEN = "tok-0123456789abcdef"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str = "db", *, data: dict[str, str] | None = None, string_data: dict[str, str] | None = None,
           uid: str = "uid-1") -> dict:
    out = {"kind": "Secret", "metadata": {"namespace": "prod", "name": name, "uid": uid}}
    if data is not None:
        out["data"] = {k: b64(v) for k, v in data.items()}
    if string_data is not None:
        out["stringData"] = string_data
    return out


@pytest.fixture
def scrubber() -> SecretScrubber:
    s = SecretScrubber(min_length=8)
    s.learn(secret(data={"password": PASSWORD, "port": "5432"}, string_data={"token": TOKEN}))
    return s


def test_a_value_is_masked_decoded_base64_and_unpadded(scrubber):
    for form in (PASSWORD, b64(PASSWORD), b64(PASSWORD).rstrip("="), TOKEN, b64(TOKEN)):
        out = scrubber.scrub_text(f"login refused for {form}!")
        assert form not in out and out.startswith("login refused for <redacted: Secret prod/db ") and out.endswith("!")
    assert scrubber.scrub_text("login refused for " + PASSWORD) == "login refused for <redacted: Secret prod/db password>"


def test_json_frames_are_masked_where_the_value_is_json_escaped(scrubber):
    frame = orjson.dumps({"r": [{"k": "reconcile", "key": "prod/app", "error": f"bad password {PASSWORD}\nretry"}],
                          "s": {"prod/app": {"error": "x " + b64(PASSWORD)}}})
    assert orjson.dumps(PASSWORD)[1:-1] in frame, "the value is escaped inside the JSON text"
    out = scrubber.scrub_json(frame)
    assert PASSWORD.encode() not in out and orjson.dumps(PASSWORD)[1:-1] not in out and b64(PASSWORD).encode() not in out
    decoded = orjson.loads(out)
    assert decoded["r"][0]["error"] == "bad password <redacted: Secret prod/db password>\nretry"
    assert decoded["s"]["prod/app"]["error"] == "x <redacted: Secret prod/db password>"
    assert list(decoded) == ["r", "s"], "key order (a reset frame's prefix) is kept"
    assert scrubber.frames_scrubbed == 1


def test_a_clean_frame_comes_back_as_the_same_bytes(scrubber):
    frame = orjson.dumps({"r": [{"k": "reconcile", "error": "nothing to see"}]})
    assert scrubber.scrub_json(frame) is frame


def test_short_values_identifiers_and_keys_are_left_alone(scrubber):
    assert scrubber.scrub_text("connect to db:5432") == "connect to db:5432", "5432 is shorter than the minimum"
    frame = orjson.dumps({"r": [{"key": f"prod/{TOKEN}", "name": TOKEN, TOKEN: 1, "msg": "a " + TOKEN}]})
    decoded = orjson.loads(scrubber.scrub_json(frame))["r"][0]
    assert decoded["key"] == f"prod/{TOKEN}" and decoded["name"] == TOKEN and decoded[TOKEN] == 1
    assert decoded["msg"] == "a <redacted: Secret prod/db token>"


def test_an_identifier_only_hit_returns_the_frame_unchanged(scrubber):
    frame = orjson.dumps({"r": [{"key": f"prod/{TOKEN}"}]})
    assert scrubber.scrub_json(frame) is frame


def test_updated_and_deleted_secrets_keep_old_values_masked():
    s = SecretScrubber(min_length=8)
    s.learn(secret(data={"password": "first-password"}))
    s.learn(secret(data={"password": "second-password"}))
    assert "<redacted" in s.scrub_text("first-password") and "<redacted" in s.scrub_text("second-password")
    s.forget(secret(data={}))
    assert "<redacted" in s.scrub_text("second-password"), "an error about a deleted Secret may come later"
    bounded = SecretScrubber(min_length=8, retired_limit=3)
    bounded.learn(secret(data={"a": "aaaaaaaaaa", "b": "bbbbbbbbbb"}))  # 3 forms each: text, base64, unpadded
    assert bounded.pattern_count == 6
    bounded.forget(secret())
    assert bounded.pattern_count == 3, "the retired set is bounded: the newest 3 patterns stay"


def test_new_values_are_matched_at_once_and_merged_past_the_small_automatons_limit():
    from controllers.telemetry.scrub import RECENT_LIMIT

    s = SecretScrubber(min_length=8)
    s.learn(secret("first", data={"password": "value-number-first"}, uid="u0"))
    assert s.scrub_text("value-number-first") == "<redacted: Secret prod/first password>"
    for i in range(RECENT_LIMIT):  # three forms each: merged into the big automaton along the way
        s.learn(secret(f"s{i}", data={"password": f"value-number-{i:04d}"}, uid=f"u{i + 1}"))
        assert s.scrub_text(f"x value-number-{i:04d} y") == f"x <redacted: Secret prod/s{i} password> y"
    assert s._base is not None and len(s._fresh) <= RECENT_LIMIT
    assert s.scrub_text("value-number-first") == "<redacted: Secret prod/first password>"


def test_binary_values_pem_lines_and_other_kinds():
    s = SecretScrubber(min_length=8)
    binary = base64.b64encode(bytes(range(200, 256))).decode()
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
    s.learn({"kind": "Secret", "metadata": {"name": "tls"}, "data": {"bin": binary, "key": b64(pem)}})
    assert s.scrub_text(binary) == "<redacted: Secret tls bin>"
    assert s.scrub_text("line MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7 leaked") == \
        "line <redacted: Secret tls key> leaked"
    assert s.scrub_text("-----BEGIN PRIVATE KEY-----") == "-----BEGIN PRIVATE KEY-----"
    s.learn({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "not-a-secret-value"}})
    s.learn({"kind": "Secret", "data": {"x": "!!not base64!!"}})  # malformed: its text form is unknown
    assert s.scrub_text("not-a-secret-value") == "not-a-secret-value"


def test_a_secret_list_is_learnt_item_by_item():
    s = SecretScrubber(min_length=8)
    assert s.knows_nothing
    items = [{k: v for k, v in secret(f"s{i}", data={"v": f"list-value-{i}"}, uid=f"u{i}").items() if k != "kind"}
             for i in range(2)]  # a list's items carry no kind
    s.learn({"kind": "SecretList", "items": [*items, "junk", None]})
    assert not s.knows_nothing
    assert s.scrub_text("list-value-0 list-value-1") == "<redacted: Secret prod/s0 v> <redacted: Secret prod/s1 v>"
    s.learn({"kind": "ConfigMapList", "items": [{"data": {"v": b64("not-a-secret-value")}}]})
    assert s.scrub_text(b64("not-a-secret-value")) == b64("not-a-secret-value")


def test_the_minimum_comes_from_the_environment_with_a_clear_error(monkeypatch):
    monkeypatch.setenv("CTRLSCOPE_SCRUB_MIN_LENGTH", "12")
    assert SecretScrubber().min_length == 12
    monkeypatch.setenv("CTRLSCOPE_SCRUB_MIN_LENGTH", "2")
    with pytest.raises(ValueError, match="at least 4"):
        SecretScrubber()
    monkeypatch.setenv("CTRLSCOPE_SCRUB_MIN_LENGTH", "eight")
    with pytest.raises(ValueError, match="whole number"):
        SecretScrubber()


def test_the_publisher_scrubs_records_and_state_before_they_reach_redis(publisher_factory, redis_url, prefix):
    import redis

    s = SecretScrubber(min_length=8)
    s.learn(secret(data={"password": PASSWORD}))
    pub = publisher_factory(scrubber=s)
    pub.publish("w/x/controller/c", {"k": "reconcile", "key": "prod/a", "error": "refused " + PASSWORD})
    pub.set_state("w/x/controller/c", "prod/a", {"error": "refused " + b64(PASSWORD)})
    pub.flush()
    client = redis.Redis.from_url(redis_url)
    try:
        blobs = [v for _, f in client.xrange(f"{prefix}stream:w/x/controller/c") for v in f.values()]
        blobs += list(client.hgetall(f"{prefix}snap:w/x/controller/c").values())
    finally:
        client.close()
    text = b"".join(blobs)
    assert b"<redacted: Secret prod/db password>" in text
    for form in (PASSWORD, b64(PASSWORD)):
        assert form.encode() not in text and orjson.dumps(form)[1:-1] not in text


def test_the_processs_own_log_lines_are_masked_too(caplog):
    import logging

    from controllers.telemetry.scrub import SECRETS, ScrubbingFilter

    SECRETS.learn(secret("logged", data={"password": "log-line-secret-value"}, uid="u-log"))
    logger = logging.getLogger("ctrlscope.test.scrub")
    handler = logging.StreamHandler(stream=__import__("io").StringIO())
    handler.addFilter(ScrubbingFilter())
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("refused log-line-secret-value")
        except RuntimeError:
            logger.exception("login with %s failed", "log-line-secret-value")
    finally:
        logger.removeHandler(handler)
    out = handler.stream.getvalue()
    assert "log-line-secret-value" not in out
    assert out.count("<redacted: Secret prod/logged password>") == 3, out  # message, source line, exception
