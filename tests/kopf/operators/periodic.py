"""A kopf operator for the tests: a timer and a daemon per PodSet labelled ``implementation=kopf``."""

import kopf

SELECT = {"labels": {"demo.ctrlscope.dev/implementation": "kopf"}}


@kopf.timer("demo.ctrlscope.dev", "v1", "podsets", interval=0.5, **SELECT)
def heartbeat(logger, **_):
    logger.info("heartbeat")


@kopf.daemon("demo.ctrlscope.dev", "v1", "podsets", **SELECT)
async def watcher_daemon(stopped, logger, **_):
    n = 0
    while not stopped:
        n += 1
        logger.info(f"daemon tick {n}")
        await stopped.wait(0.4)
