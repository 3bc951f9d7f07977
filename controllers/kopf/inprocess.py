"""In-process mode: an unmodified kopf operator, run by kopf's own machinery, publishing protocol v1.1.

kopf has no hooks for observers, so ``install`` wraps eight of its internal functions (module
attributes that kopf looks up at call time, so the wrapped ones are what kopf calls); each wrapper
calls the original and reports through the publisher API (``controllers.publish``):

=====================================================  ==============================================
kopf (``kopf._core`` / ``kopf._cogs``)                   what it is reported as
=====================================================  ==============================================
``reactor.queueing.watcher``                           one resource's watch stream (per namespace):
                                                       an informer, a controller and its queue
``clients.watching.infinite_watch``                    each raw event entering an object's backlog:
                                                       a queue ``add`` (``dedup``/``defer`` when the
                                                       object is already queued or being handled)
``clients.fetching.fetch_objs`` (1.45) /               the LIST: ``list``, the cache replaced, synced
``list_objs`` (1.43, 1.44)
``clients.watching.watch_objs``                        each WATCH: ``watch_start``, watch events,
                                                       ``watch_end`` (closed / expired / error): the
                                                       silent restarts kopf users cannot see
``processor`` (the watcher's argument)                 the per-object worker handling one event:
                                                       queue ``get`` ... ``done``
``actions.execution.execute_handlers_once``            the handlers kopf's lifecycle left for later:
                                                       ``progress`` pending
``actions.execution.execute_handler_once`` +           every handler invocation: ``reconcile_start``
``invoke_handler``                                     / ``reconcile`` with handler id, cause, retry,
                                                       outcome from kopf's own ``Outcome`` (what kopf
                                                       decided: temporary, backoff, permanent...) and
                                                       the delay until kopf runs it again (also a
                                                       queue ``add_after``, the timeline's countdown)
``clients.auth.APIContext.__init__``                  kopf's API session, to add the trace config
                                                       that counts its writes (below)
=====================================================  ==============================================

Besides: a ``logging.Handler`` on kopf's documented per-object logger ``kopf.objects`` (records carry
``k8s_ref``) publishes the operator's log lines per object; an aiohttp ``TraceConfig`` added to
kopf's API session, and a wrapper of the official ``kubernetes`` client's REST call (what handlers
usually write with), publish the API writes made while an object was handled.

Which object and controller a call belongs to travels in a ``ContextVar``: kopf runs each object in
its own asyncio task (tasks copy the context they are created in) and runs sync handlers in threads
with a copy of the context, so the variable set by the watcher and the processor wrappers is what
the handler, the logger and the API clients see.

Internals are version-specific: ``SUPPORTED`` is the kopf range this is written and tested against
(``tests/kopf`` runs every pinned version); ``install`` refuses others with a clear error unless
told to try anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from typing import Any

import orjson

from controllers.kopf import ACTIVITIES, controller_name, informer_name
from controllers.observer import written_rv
from controllers.publish import ControllerReport, InformerReport, ProtocolPublisher, QueueReport, object_key
from controllers.schema import ErrorKind, HandlerCause, HandlerProgress, LogLevel, ObservationMode, WatchEndReason
from controllers.telemetry.scrub import SECRETS

log = logging.getLogger("ctrlscope.kopf")

SUPPORTED = ((1, 43), (1, 46))
"""kopf versions this module supports: from 1.43 up to (not including) 1.46."""
TESTED = ("1.43.0", "1.44.6", "1.45.2")
"""The versions ``tests/kopf`` runs against (``requirements-kopf.txt``); the last is the demo's."""

UNSEEN = (
    "API calls made with clients other than kopf's own and the official kubernetes client "
    "(pykube, kr8s, a raw HTTP session) are not counted as writes.",
    "Sub-handlers run inside their parent: the parent's attempts show them as 'children' retries.",
)


class KopfVersionError(RuntimeError):
    pass


def kopf_version() -> str:
    try:
        return metadata.version("kopf")
    except metadata.PackageNotFoundError:
        raise KopfVersionError("kopf is not installed: pip install -r requirements.txt") from None


def check_version(version: str | None = None) -> tuple[int, int]:
    version = version or kopf_version()
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        raise KopfVersionError(f"cannot read kopf's version {version!r}") from None
    if not SUPPORTED[0] <= (major, minor) < SUPPORTED[1]:
        lo, hi = (".".join(map(str, v)) for v in SUPPORTED)
        raise KopfVersionError(
            f"kopf {version} is not supported: in-process mode wraps kopf internals and is tested with "
            f"kopf >= {lo}, < {hi} ({', '.join(TESTED)}). Install one of those, pass --unsupported-kopf to "
            f"try anyway, or use zero-code mode (runcontrollers --kopf RESOURCE), which reads only what "
            f"kopf stores on the objects.")
    return major, minor


# -- what a call belongs to ----------------------------------------------------------------------------
@dataclasses.dataclass
class _Stream:
    """One watcher: one resource in one namespace (or cluster-wide)."""

    informer: InformerReport
    queue: QueueReport
    controller: ControllerReport
    namespace: str | None


@dataclasses.dataclass
class _Scope:
    """What is being handled right now: a stream's object, and the handler running, if any."""

    controller: ControllerReport
    key: str
    stream: _Stream | None = None
    handler: str | None = None
    raised: list[BaseException] = dataclasses.field(default_factory=list)


_stream_var: contextvars.ContextVar[_Stream | None] = contextvars.ContextVar("ctrlscope_kopf_stream", default=None)
_scope_var: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("ctrlscope_kopf_scope", default=None)


_LEVELS = {logging.DEBUG: LogLevel.DEBUG, logging.INFO: LogLevel.INFO, logging.WARNING: LogLevel.WARNING,
           logging.ERROR: LogLevel.ERROR, logging.CRITICAL: LogLevel.CRITICAL}


def _level(levelno: int) -> LogLevel:
    for threshold in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO):
        if levelno >= threshold:
            return _LEVELS[threshold]
    return LogLevel.DEBUG


def _error_text(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class KopfTelemetry:
    """The wrappers' shared state: the publisher, a report per resource, and the originals."""

    def __init__(self, publisher: ProtocolPublisher, *, log_level: int = logging.INFO) -> None:
        self.pub = publisher
        self.log_level = log_level
        self._controllers: dict[str, ControllerReport] = {}
        self._by_kind: dict[tuple[str, str], ControllerReport] = {}  # (apiVersion, kind) -> controller
        self._originals: list[tuple[Any, str, Any]] = []
        self._log_handler: logging.Handler | None = None
        self._rest_patched: Any = None

    # -- reports ---------------------------------------------------------------------------------
    def controller(self, name: str, watches: list[str]) -> ControllerReport:
        report = self._controllers.get(name)
        if report is None or watches:
            report = self._controllers[name] = self.pub.controller(
                name, watches=watches, workers=0, mode=ObservationMode.IN_PROCESS, unseen=UNSEEN)
        return report

    def stream_for(self, resource: Any, namespace: str | None) -> _Stream:
        api_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
        name = controller_name(resource.group, resource.plural)
        informer = informer_name(api_version, resource.kind, namespace)
        controller = self.controller(name, [informer])
        self._by_kind[(api_version, resource.kind)] = controller
        return _Stream(informer=self.pub.informer(informer), queue=self.pub.queue(name), controller=controller,
                       namespace=namespace)

    # -- install / uninstall -----------------------------------------------------------------------
    def _patch(self, module: Any, name: str, wrapper: Callable[[Any], Any]) -> None:
        original = getattr(module, name)
        self._originals.append((module, name, original))
        setattr(module, name, wrapper(original))

    def install(self, *, unsupported: bool = False) -> KopfTelemetry:
        try:
            check_version()
        except KopfVersionError:
            if not unsupported:
                raise
            log.warning("kopf %s is outside the tested range: trying anyway", kopf_version())
        from kopf._cogs.clients import auth, fetching, watching
        from kopf._core.actions import execution
        from kopf._core.reactor import queueing

        self._patch(queueing, "watcher", self._wrap_watcher)
        self._patch(watching, "infinite_watch", self._wrap_infinite_watch)
        self._patch(watching, "watch_objs", self._wrap_watch_objs)
        if hasattr(fetching, "fetch_objs"):
            self._patch(fetching, "fetch_objs", self._wrap_fetch_objs)
        else:
            self._patch(fetching, "list_objs", self._wrap_list_objs)
        self._patch(execution, "execute_handlers_once", self._wrap_execute_all)
        self._patch(execution, "execute_handler_once", self._wrap_execute)
        self._patch(execution, "invoke_handler", self._wrap_invoke)
        self._patch(auth.APIContext, "__init__", self._wrap_api_context)
        self._install_rest_client()
        self._log_handler = _ObjectLogHandler(self)
        logging.getLogger("kopf.objects").addHandler(self._log_handler)
        return self

    def uninstall(self) -> None:
        for module, name, original in reversed(self._originals):
            setattr(module, name, original)
        self._originals.clear()
        if self._log_handler is not None:
            logging.getLogger("kopf.objects").removeHandler(self._log_handler)
            self._log_handler = None
        if self._rest_patched is not None:
            cls, original = self._rest_patched
            cls.request = original
            self._rest_patched = None

    # -- watch streams -----------------------------------------------------------------------------
    def _wrap_watcher(self, original: Any) -> Any:
        telemetry = self

        @functools.wraps(original)
        async def watcher(*, namespace: Any, settings: Any, resource: Any, processor: Any, **kwargs: Any) -> None:
            # Only the resource-handling watchers (processor = kopf's process_resource_event); the
            # ones kopf runs to observe CRDs and namespaces are its business.
            func = getattr(processor, "func", None)
            if getattr(func, "__name__", "") != "process_resource_event":
                return await original(namespace=namespace, settings=settings, resource=resource,
                                      processor=processor, **kwargs)
            stream = telemetry.stream_for(resource, namespace)
            _stream_var.set(stream)  # this task's: its infinite_watch, and every object's worker task
            return await original(namespace=namespace, settings=settings, resource=resource,
                                  processor=telemetry._wrap_processor(processor, stream), **kwargs)

        return watcher

    def _wrap_infinite_watch(self, original: Any) -> Any:
        @functools.wraps(original)
        async def infinite_watch(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            stream = _stream_var.get()
            async for event in original(*args, **kwargs):
                if stream is not None and isinstance(event, dict) and event.get("type") != "BOOKMARK":
                    obj = event.get("object")
                    if isinstance(obj, dict):
                        # The watcher puts it in the object's backlog next: an Add of the object's
                        # key (absorbed when it is already waiting there or being handled).
                        stream.queue.add(object_key(obj))
                yield event

        return infinite_watch

    def _wrap_fetch_objs(self, original: Any) -> Any:
        @functools.wraps(original)
        async def fetch_objs(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            stream = _stream_var.get()
            if stream is None:
                async for item in original(*args, **kwargs):
                    yield item
                return
            start, items, rv = time.monotonic(), [], ""
            try:
                async for chunk, rv in original(*args, **kwargs):
                    items.extend(chunk)
                    yield chunk, rv
            except (GeneratorExit, asyncio.CancelledError):
                raise  # the operator is stopping: not a failed LIST
            except Exception as exc:
                stream.informer.list_failed(_error_text(exc), duration=time.monotonic() - start)
                raise
            stream.informer.listed(items, resource_version=rv or "", duration=time.monotonic() - start)
            stream.informer.synced()

        return fetch_objs

    def _wrap_list_objs(self, original: Any) -> Any:
        @functools.wraps(original)
        async def list_objs(*args: Any, **kwargs: Any) -> Any:
            stream = _stream_var.get()
            start = time.monotonic()
            try:
                objs, rv = await original(*args, **kwargs)
            except Exception as exc:
                if stream is not None:
                    stream.informer.list_failed(_error_text(exc), duration=time.monotonic() - start)
                raise
            if stream is not None:
                stream.informer.listed(objs, resource_version=rv or "", duration=time.monotonic() - start)
                stream.informer.synced()
            return objs, rv

        return list_objs

    def _wrap_watch_objs(self, original: Any) -> Any:
        @functools.wraps(original)
        async def watch_objs(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            stream = _stream_var.get()
            if stream is None:
                async for item in original(*args, **kwargs):
                    yield item
                return
            informer = stream.informer
            informer.watch_started(kwargs.get("since") or "")
            reason, error = WatchEndReason.CLOSED, None
            try:
                async for raw in original(*args, **kwargs):
                    kind, obj = raw.get("type"), raw.get("object")
                    if kind == "ERROR":
                        code = obj.get("code") if isinstance(obj, dict) else None
                        reason = WatchEndReason.EXPIRED if code == 410 else WatchEndReason.ERROR
                        error = str((obj or {}).get("message") or obj) if isinstance(obj, dict) else str(obj)
                    elif kind == "BOOKMARK":
                        informer.bookmark(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
                    elif kind in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                        informer.watch_event(kind, obj)
                    yield raw
            except (GeneratorExit, asyncio.CancelledError):
                reason = WatchEndReason.STOPPED
                raise
            except Exception as exc:
                reason, error = WatchEndReason.ERROR, _error_text(exc)
                raise
            finally:
                informer.watch_ended(reason, error=error)

        return watch_objs

    # -- per-object processing --------------------------------------------------------------------
    def _wrap_processor(self, processor: Any, stream: _Stream) -> Any:
        async def process(*, raw_event: Any, **kwargs: Any) -> Any:
            obj = raw_event.get("object") if isinstance(raw_event, dict) else None
            if not isinstance(obj, dict):
                return await processor(raw_event=raw_event, **kwargs)
            SECRETS.learn(obj)  # an operator watching Secrets: their values are masked in every outgoing string
            key = object_key(obj)
            stream.queue.get(key)
            token = _scope_var.set(_Scope(controller=stream.controller, key=key, stream=stream))
            try:
                return await processor(raw_event=raw_event, **kwargs)
            finally:
                _scope_var.reset(token)
                stream.queue.done(key)

        return process

    # -- handlers ---------------------------------------------------------------------------------
    def _wrap_invoke(self, original: Any) -> Any:
        @functools.wraps(original)
        async def invoke_handler(*args: Any, **kwargs: Any) -> Any:
            try:
                return await original(*args, **kwargs)
            except Exception as exc:
                scope = _scope_var.get()
                if scope is not None:
                    scope.raised.append(exc)  # for errors kopf ignores: its Outcome shows no trace of them
                raise

        return invoke_handler

    def _wrap_execute(self, original: Any) -> Any:
        telemetry = self

        @functools.wraps(original)
        async def execute_handler_once(*args: Any, **kwargs: Any) -> Any:
            bound = _bind(original, args, kwargs)
            handler, cause, state = bound.get("handler"), bound.get("cause"), bound.get("state")
            if handler is None or cause is None:
                return await original(*args, **kwargs)
            outer = _scope_var.get()
            controller, key, cause_name = telemetry._attempt_target(handler, cause, outer)
            scope = _Scope(controller=controller, key=key, stream=outer.stream if outer else None,
                           handler=str(handler.id))
            token = _scope_var.set(scope)
            retry = int(getattr(state, "retries", 0) or 0)
            cancelled: asyncio.CancelledError | None = None
            delay = outcome = None
            try:
                with controller.reconcile(key, handler=str(handler.id), cause=cause_name, retry=retry) as attempt:
                    try:
                        outcome = await original(*args, **kwargs)
                    except asyncio.CancelledError as exc:
                        # kopf stops a daemon (or the operator exits) by cancelling it: the attempt
                        # ends normally, and the cancellation goes on.
                        cancelled = exc
                    else:
                        delay = _describe_outcome(attempt, outcome, scope.raised)
            finally:
                _scope_var.reset(token)
            if cancelled is not None:
                raise cancelled
            if delay is not None and scope.stream is not None:
                scope.stream.queue.add_after(key, delay)  # kopf sleeps, then touches the object
            return outcome

        return execute_handler_once

    def _wrap_execute_all(self, original: Any) -> Any:
        telemetry = self

        @functools.wraps(original)
        async def execute_handlers_once(*args: Any, **kwargs: Any) -> Any:
            outcomes = await original(*args, **kwargs)
            bound = _bind(original, args, kwargs)
            try:
                telemetry._report_pending(bound.get("handlers") or (), bound.get("cause"), bound.get("state"),
                                          outcomes)
            except Exception:  # noqa: BLE001 -- a report must never break kopf's handling
                log.exception("could not report the handlers waiting for their turn")
            return outcomes

        return execute_handlers_once

    def _report_pending(self, handlers: Any, cause: Any, state: Any, outcomes: dict[Any, Any]) -> None:
        """Handlers of this cause that kopf's lifecycle did not pick this time (kopf's default runs
        one at a time) and that are not finished or waiting out a delay: ``pending``."""
        from kopf._core.intents.handlers import ChangingHandler

        scope = _scope_var.get()
        if scope is None or state is None or getattr(cause, "body", None) is None:
            return
        for handler in handlers:
            if not isinstance(handler, ChangingHandler) or handler.id in outcomes:
                continue
            try:
                handler_state = state[handler.id]
            except KeyError:
                continue
            if getattr(handler_state, "finished", False) or not getattr(handler_state, "awakened", True):
                continue
            scope.controller.progress(scope.key, str(handler.id), HandlerProgress.PENDING,
                                      retries=int(getattr(handler_state, "retries", 0) or 0),
                                      cause=_cause_of(handler, cause))

    def _attempt_target(self, handler: Any, cause: Any, scope: _Scope | None) -> tuple[ControllerReport, str, str]:
        """Which controller and key an invocation is reported under, and its cause."""
        from kopf._core.intents.handlers import ActivityHandler

        body = getattr(cause, "body", None)
        if isinstance(handler, ActivityHandler) or body is None:
            activity = getattr(getattr(handler, "activity", None), "value", None) or str(handler.id)
            return self.controller(ACTIVITIES, []), str(activity), HandlerCause.ACTIVITY
        key = object_key(dict(body))
        controller = scope.controller if scope is not None else self._controller_for(body)
        return controller, key, _cause_of(handler, cause)

    def _controller_for(self, body: Any) -> ControllerReport:
        ref = (str(body.get("apiVersion", "")), str(body.get("kind", "")))
        report = self._by_kind.get(ref)
        if report is None:
            report = self.controller(f"kopf/{ref[1].lower() or 'objects'}", [])
        return report

    # -- API writes -------------------------------------------------------------------------------
    def _wrap_api_context(self, original: Any) -> Any:
        telemetry = self

        @functools.wraps(original)
        def __init__(context: Any, *args: Any, **kwargs: Any) -> None:
            original(context, *args, **kwargs)
            configs = getattr(getattr(context, "session", None), "_trace_configs", None)
            if isinstance(configs, list):
                configs.append(telemetry._trace_config())
            else:
                log.warning("cannot count kopf's API writes: its aiohttp session has no trace configs")

        return __init__

    def _trace_config(self) -> Any:
        import aiohttp

        trace = aiohttp.TraceConfig()

        async def start(session: Any, ctx: Any, params: Any) -> None:
            ctx.start = time.monotonic()

        async def end(session: Any, ctx: Any, params: Any) -> None:
            self.write(params.method, params.url.path, params.response.status, time.monotonic() - ctx.start)

        async def failed(session: Any, ctx: Any, params: Any) -> None:
            self.write(params.method, params.url.path, 0, time.monotonic() - getattr(ctx, "start", time.monotonic()))

        trace.on_request_start.append(start)
        trace.on_request_end.append(end)
        trace.on_request_exception.append(failed)
        trace.freeze()
        return trace

    def _install_rest_client(self) -> None:
        try:
            from kubernetes.client import rest
        except ImportError:
            return
        cls = rest.RESTClientObject
        original = cls.request
        telemetry = self

        @functools.wraps(original)
        def request(client: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            code = 0
            rv = None
            try:
                response = original(client, method, url, *args, **kwargs)
                code = int(getattr(response, "status", 0) or 0)
                if code == 200 and "/secrets" in str(url):
                    _learn_on_read(response)
                elif 200 <= code < 300 and str(method).upper() != "GET" and _scope_var.get() is not None:
                    rv = written_rv(response.read())  # read once, kept by RESTResponse for its caller
                return response
            except Exception as exc:
                code = int(getattr(exc, "status", 0) or 0)
                raise
            finally:
                telemetry.write(method, url, code, time.monotonic() - start, rv=rv)

        cls.request = request
        self._rest_patched = (cls, original)

    def write(self, method: str, url: Any, code: int, duration: float, rv: str | None = None) -> None:
        """An API request made while an object was handled (GETs are not writes). ``rv``: the
        resourceVersion the official client's write got back; kopf's own aiohttp writes (its
        progress and status patches) have none: the trace hook ends before the body is read."""
        scope = _scope_var.get()
        if scope is None or str(method).upper() == "GET":
            return
        path = str(url)
        if "://" in path:
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        scope.controller.write(method=str(method).upper(), path=path.partition("?")[0], code=code,
                               duration=duration, attributed=True, rv=rv)

    # -- logs -------------------------------------------------------------------------------------
    def on_log_record(self, record: logging.LogRecord) -> None:
        if record.levelno < self.log_level:
            return
        ref = getattr(record, "k8s_ref", None)
        scope = _scope_var.get()
        if not isinstance(ref, dict):
            return
        key = object_key({"metadata": ref})  # k8s_ref has the object's namespace and name
        if scope is not None and scope.key == key:
            controller, handler = scope.controller, scope.handler
        else:
            controller, handler = self._controller_for(ref), None
        controller.log(key, _level(record.levelno), record.getMessage(), handler=handler)


class _ObjectLogHandler(logging.Handler):
    def __init__(self, telemetry: KopfTelemetry) -> None:
        super().__init__(level=logging.NOTSET)
        self.telemetry = telemetry

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.telemetry.on_log_record(record)
        except Exception:  # noqa: BLE001 -- a log line must never break the operator
            self.handleError(record)


def _learn_on_read(response: Any) -> None:
    """A handler reads Secrets with the kubernetes client: learn their values when the body is read
    (the REST layer returns before reading it; a streamed watch never calls ``read`` and is not seen)."""
    read = getattr(response, "read", None)
    if read is None:
        return

    def reading() -> Any:
        data = read()
        _learn_secrets(data)
        return data

    response.read = reading


def _learn_secrets(data: Any) -> None:
    """Learn the Secret or SecretList in a response body (anything else is ignored)."""
    try:
        decoded = orjson.loads(data)
    except (orjson.JSONDecodeError, TypeError):
        return
    SECRETS.learn(decoded)


def _bind(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name. kopf passes these by keyword (the fast path, on every handler
    call); positional ones are bound with the function's signature, looked up once."""
    if not args:
        return kwargs
    try:
        return dict(_signature(fn).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        return dict(kwargs)


@functools.lru_cache(maxsize=32)
def _signature(fn: Any) -> Any:
    import inspect

    return inspect.signature(fn)


def _cause_of(handler: Any, cause: Any) -> str:
    from kopf._core.intents import handlers as h

    for cls, name in ((h.TimerHandler, HandlerCause.TIMER), (h.DaemonHandler, HandlerCause.DAEMON),
                      (h.WatchingHandler, HandlerCause.EVENT), (h.IndexingHandler, HandlerCause.INDEX),
                      (h.WebhookHandler, HandlerCause.ADMISSION)):
        if isinstance(handler, cls):
            return name
    if getattr(handler, "field", None):
        return HandlerCause.FIELD
    reason = getattr(getattr(cause, "reason", None), "value", None)
    return str(reason) if reason else HandlerCause.UPDATE


def _describe_outcome(attempt: Any, outcome: Any, raised: list[BaseException]) -> float | None:
    """Tell the attempt what kopf decided (its ``Outcome``); the delay until kopf runs it again."""
    from kopf._core.actions import execution as ex

    exc = getattr(outcome, "exception", None)
    if exc is None:
        if raised:  # kopf raised nothing to us, yet the handler raised: kopf ignored it
            attempt.ignore(_error_text(raised[-1]))
        return None
    text = _error_text(exc)
    if not outcome.final:
        delay = float(outcome.delay or 0.0)
        kind = (ErrorKind.CHILDREN if isinstance(exc, ex.HandlerChildrenRetry)
                else ErrorKind.TEMPORARY if isinstance(exc, ex.TemporaryError) else ErrorKind.EXCEPTION)
        attempt.retry_after(delay, text, kind=kind)
        return delay
    kind = (ErrorKind.TIMEOUT if isinstance(exc, ex.HandlerTimeoutError)
            else ErrorKind.RETRIES if isinstance(exc, ex.HandlerRetriesError) else ErrorKind.PERMANENT)
    attempt.give_up(text, kind=kind)
    return None


@contextlib.contextmanager
def instrumented(publisher: ProtocolPublisher, *, unsupported: bool = False,
                 log_level: int = logging.INFO) -> Any:
    """Install the wrappers for the length of the block (kopf's ``run`` goes inside)."""
    telemetry = KopfTelemetry(publisher, log_level=log_level).install(unsupported=unsupported)
    try:
        yield telemetry
    finally:
        telemetry.uninstall()
