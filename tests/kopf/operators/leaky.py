"""A careless kopf operator for the tests: it handles Secrets and puts a value in its log and errors.

On create of a Secret labelled ``ctrlscope.dev/leaky``: logs the decoded password and raises
``TemporaryError`` quoting it raw and base64 (what real handlers do when a login fails); the second
attempt succeeds. Plain kopf: no ctrlscope.
"""

import base64

import kopf


@kopf.on.create("v1", "secrets", labels={"ctrlscope.dev/leaky": "yes"})
def login(body, retry, logger, **_):
    encoded = body["data"]["password"]
    password = base64.b64decode(encoded).decode()
    logger.info(f"logging in with password={password}")
    if retry < 1:
        raise kopf.TemporaryError(f"login refused for password={password} (base64 {encoded})", delay=1)
    return {"logged_in": True}
