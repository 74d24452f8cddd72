# SPDX-License-Identifier: MIT
"""`Job`: a unit of background work, as data plus a stable name.

A job is dispatched by one process and run by another, perhaps after a
deploy, so it must be data (its typed fields are the wire payload) and it
must be found again by a name that does not change when the class is moved
or renamed. A `Job` subclass is a keyword-only dataclass; its fields are
checked against their type hints when the job is built, so a bad argument
fails at the call that dispatches it.

```python
class SendWelcome(Job):
    name = "send-welcome"
    queue = "emails"
    tries = 5

    user_id: int
    locale: str = "en"

    async def handle(self, ctx: JobContext) -> None:
        ...
```

The `@job` decorator turns a function into the same thing, for the common
case of a job with no options beyond these.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import typing
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import timedelta
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, overload

from typing_extensions import dataclass_transform

from .backoff import JOB_BACKOFF_CAP, JOB_BACKOFF_SPREAD, jittered, job_backoff
from .context import JobContext
from .payload import JSONValue, PayloadCodec, _Mismatch, mismatch_error

P = ParamSpec("P")

LIMIT_KEY = "rq-limit-key"
"""The envelope header carrying a limited job's `limit_key()`, set at dispatch."""

ORDERING_KEY = "rq-ordering-key"
"""The envelope header carrying a job's `ordering_key()`, set at dispatch when it has one:
what a driver keeps the order of (a column, a line in memory, Kafka's record key, SQS FIFO's
message group)."""

ORDERING_KEY_LENGTH = 128
"""The most characters an ordering key may have: SQS FIFO's group ids stop there, and a
database column indexed on every dialect holds it."""

DEFAULT_UNIQUE_FOR = timedelta(hours=1)
MAX_BACKOFF = JOB_BACKOFF_CAP

_CHECKED = "_rainier_queue_checked_payload"
"""Where a job keeps the fingerprint and payload it last passed the check with (see
`packed_payload`); not a field, so never part of the payload, equality or repr."""

_REBUILDING: ContextVar[bool] = ContextVar("rainier_queue_rebuilding_job", default=False)
"""True while `Job.from_payload` builds a job from a payload it has just checked."""


@dataclass_transform(kw_only_default=True, field_specifiers=(dataclasses.field,))
class Job:
    """Subclass this, give it a `name`, typed fields and a `handle` method."""

    name: ClassVar[str]
    """Stable wire name, unique in the registry. Never derived from the class path,
    because renaming a class must not strand the jobs already queued."""
    queue: ClassVar[str] = "default"
    """The queue a dispatch goes to. Define a `queue(self) -> str` method instead to
    choose it per job at dispatch (for example from a field)."""
    tries: ClassVar[int] = 3
    """How many deliveries the job may use before it goes to the failed store."""
    timeout: ClassVar[timedelta | float | None] = None
    """Per-job run limit; beats the worker's. None means the worker's applies.

    An `async def` handler past it is cancelled. A plain `def` handler runs in
    a thread, which Python cannot stop: `HandlerTimedOut` is raised in the
    thread (it stops Python code at once, but a call into C such as a sleep
    or a socket read gets it only when the call returns), and the job keeps
    its slot and lease until the thread returns. Only then is the attempt
    settled as timed out, so a retry never runs beside it. See "Time limits"
    in docs/lifecycle.md."""
    unique_for: ClassVar[timedelta] = DEFAULT_UNIQUE_FOR
    """How long a uniqueness lock stands if no worker releases it (a safety net)."""
    keep_result: ClassVar[timedelta | None] = None
    """Keep what `handle` returns (it must be JSON), for this long after the job succeeds,
    for `QueueManager.result`. None (the default): nothing is kept, and a success costs
    the worker no write beyond its acknowledgement. Needs a driver that keeps records
    (`Capabilities.records`); see docs/operations.md for the cost."""
    rate_limit: ClassVar[str | None] = None
    """At most this many starts per period for each `limit_key()`, across every worker:
    `"100/m"`, `"5/s"`, `"1000/h"`, `"10/30s"`. None (the default): no rate limit.
    A job over it waits, unrun and with its attempt given back (docs/flow-control.md)."""
    concurrency_limit: ClassVar[int | None] = None
    """At most this many jobs of one `limit_key()` run at once, across every worker.
    None (the default): no limit."""

    _codec: ClassVar[PayloadCodec | None] = None

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__dataclass_fields__" not in cls.__dict__:
            dataclasses.dataclass(kw_only=True)(cls)
        if abstract:
            return
        name = cls.__dict__.get("name", getattr(cls, "name", None))
        if not isinstance(name, str) or not name.strip():
            raise TypeError(
                f"{cls.__qualname__} needs a `name`: a stable, non-empty wire name such as "
                f'name = "{_kebab(cls.__name__)}" (pass abstract=True for a base class)'
            )
        tries = cls.__dict__.get("tries", cls.tries)
        if not isinstance(tries, int) or isinstance(tries, bool) or tries < 1:
            raise TypeError(f"{cls.__qualname__}.tries must be a whole number of at least 1")
        _check_limits(cls)
        cls._codec = None
        # A forward reference not yet defined is checked again at first use.
        with contextlib.suppress(NameError):
            cls._payload_codec()

    @classmethod
    def _payload_codec(cls) -> PayloadCodec:
        """The class's fields checked once (refused if one cannot travel as JSON), then reused."""
        codec = cls._codec
        if codec is None:
            codec = cls._codec = PayloadCodec(cls)
        return codec

    def __post_init__(self) -> None:
        # A job rebuilt from its stored payload had every field checked on the
        # way in (`from_payload`); checking them again on the way out would
        # double the cost of starting each job for nothing.
        if not _REBUILDING.get():
            self.packed_payload()

    # -- what the worker calls -------------------------------------------------

    def handle(self, ctx: JobContext) -> Awaitable[object] | object:
        """Do the work. Raising means: try again, until the attempts run out.

        What it returns is dropped, unless the class sets `keep_result`.

        May be `async def` or a plain `def`; a plain one runs in the worker's
        thread pool so it cannot block other jobs.
        """
        raise NotImplementedError(f"{type(self).__qualname__} must define handle(self, ctx)")

    def failed(self, ctx: JobContext, error: BaseException) -> Awaitable[None] | None:
        """Called once when the job goes to the failed store (last attempt raised,
        timed out, or its worker died on it). Does nothing by default."""
        return None

    def backoff(self, attempt: int) -> timedelta:
        """How long to wait before the next try, after attempt number `attempt` failed.

        Exponential: about 1 s after the first failure, then 2 s, 4 s, ... capped
        at 64 s, each moved at random by up to a fifth either way, so that jobs
        which failed together (a dependency went down under all of them) do not
        all come back in the same moment and knock it over again. A job that
        overrides this gets exactly the delays it returns; `backoff.job_backoff`
        is the curve without the jitter.
        """
        return jittered(job_backoff(attempt), spread=JOB_BACKOFF_SPREAD)

    def unique_id(self) -> str | None:
        """Return an id to make dispatch unique by (job name, id); None for no uniqueness.

        While a job with the same name and id is waiting or running, another
        dispatch of it is dropped. An empty string means one at a time for
        the whole job type.
        """
        return None

    def limit_key(self) -> str | None:
        """The key `rate_limit` and `concurrency_limit` count by (a tenant, an API).

        Jobs of any class that share a key share its budget. By default one
        key for the whole job type (its name); None means this job is not
        limited. Only asked of a class that declares a limit, at dispatch.
        """
        return type(self).name

    def ordering_key(self) -> str | None:
        """Jobs that share this key run one at a time, in the order they were dispatched.

        None (the default): the job keeps no order with any other. Not
        uniqueness: a second job with the key is queued behind the first, never
        dropped. Jobs of any class that return the same key share one line.
        Asked at dispatch, only of a class that overrides it; a driver that
        cannot keep the order refuses the dispatch (docs/flow-control.md).
        """
        return None

    # -- wire form -------------------------------------------------------------

    def to_payload(self) -> JSONValue:
        """The job's fields as JSON, checked against their types: new data on every call."""
        cls = type(self)
        codec = cls._codec or cls._payload_codec()
        try:
            return codec.dump(self)
        except _Mismatch as exc:
            raise mismatch_error(f"{cls.__qualname__} (job `{cls.name}`)", exc) from None

    def packed_payload(self) -> JSONValue:
        """`to_payload`, but the payload checked last time if the fields have not changed since.

        What dispatch puts in the envelope. A job is checked when it is built
        and usually dispatched unchanged, so checking it again would double
        the cost of dispatch for nothing; but a job is a mutable dataclass, so
        "unchanged" is decided by comparing a fingerprint of its fields (their
        MessagePack form, which costs a fraction of the check) with the one
        taken when they were last checked. The payload is then shared by the
        envelopes of this job: like the envelope, it is never changed in place.
        """
        cls = type(self)
        codec = cls._codec or cls._payload_codec()
        state: dict[str, Any] | None = getattr(self, "__dict__", None)
        fingerprint = codec.fingerprint(self)
        if state is not None and fingerprint is not None:
            checked = state.get(_CHECKED)
            if checked is not None and checked[0] == fingerprint:
                return checked[1]
        payload = self.to_payload()
        if state is not None and fingerprint is not None:
            state[_CHECKED] = (fingerprint, payload)
        return payload

    @classmethod
    def from_payload(cls, payload: JSONValue) -> Job:
        """Rebuild the job from its stored payload, or say how they diverged."""
        codec = cls._codec or cls._payload_codec()
        rebuilding = _REBUILDING.set(True)
        try:
            built: Job = codec.load({} if payload is None else payload)
        except _Mismatch as exc:
            raise mismatch_error(
                f"the stored payload of job `{cls.name}` has diverged from {cls.__qualname__}", exc
            ) from None
        finally:
            _REBUILDING.reset(rebuilding)
        return built

    def queue_name(self) -> str:
        """The queue this job goes to: the `queue` constant, or the `queue()` method's answer."""
        chosen: object = type(self).queue
        if callable(chosen):
            chosen = chosen(self)
        if not isinstance(chosen, str) or not chosen:
            raise TypeError(f"{type(self).__qualname__}.queue must give a non-empty string")
        return chosen

    @classmethod
    def timeout_delta(cls) -> timedelta | None:
        """The job's own timeout as a `timedelta`, or None."""
        if cls.timeout is None:
            return None
        if isinstance(cls.timeout, timedelta):
            return cls.timeout
        return timedelta(seconds=cls.timeout)


class JobFunction(Generic[P]):
    """What `@job` returns: call it with the job's arguments to get a dispatchable job."""

    def __init__(self, job_class: type[Job], signature: inspect.Signature) -> None:
        self.job_class = job_class
        self.name = job_class.name
        self._signature = signature

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"job `{self.name}`: {exc}") from None
        return self.job_class(**bound.arguments)

    def __repr__(self) -> str:
        return f"<job function {self.name!r}>"


JobFn = Callable[..., Awaitable[None] | None]


@overload
def job(
    *,
    name: str,
    queue: str = ...,
    tries: int = ...,
    timeout: timedelta | float | None = ...,
    unique_for: timedelta = ...,
    backoff: Callable[[int], timedelta] | None = ...,
    keep_result: timedelta | None = ...,
    rate_limit: str | None = ...,
    concurrency_limit: int | None = ...,
    ordering_key: str | None = ...,
) -> _Decorator: ...
@overload
def job(fn: None = None, **options: Any) -> _Decorator: ...
def job(fn: None = None, **options: Any) -> _Decorator:
    """Turn a function into a job: its parameters become the job's typed fields.

    ```python
    @job(name="resize-image", queue="media", tries=5)
    async def resize_image(ctx: JobContext, path: str, width: int) -> None: ...

    await manager.dispatch(resize_image(path="a.png", width=200))
    ```

    The first parameter receives the `JobContext` when it is annotated so or
    named `ctx`; the function may also take no context at all.

    A plain `def` function runs in the worker's thread pool. Past its
    `timeout`, `HandlerTimedOut` is raised inside it, which ends Python code
    but reaches a call into C (a sleep, a socket read) only when that call
    returns; until the function returns, its job keeps its worker slot and
    lease, and its retry waits (`Job.timeout`).

    `ordering_key="account_id"` names the parameter whose value is the job's
    `Job.ordering_key()`: calls with the same value run one at a time, in the
    order they were dispatched (a None value keeps no order).
    """
    if "name" not in options:
        raise TypeError('@job needs a stable wire name: @job(name="...")')
    unknown = set(options) - {
        "name",
        "queue",
        "tries",
        "timeout",
        "unique_for",
        "backoff",
        "keep_result",
        "rate_limit",
        "concurrency_limit",
        "ordering_key",
    }
    if unknown:
        raise TypeError(f"@job does not take {', '.join(sorted(unknown))}")
    return _Decorator(options)


class _Decorator:
    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options

    @overload
    def __call__(
        self, fn: Callable[Concatenate[JobContext, P], Awaitable[None] | None]
    ) -> JobFunction[P]: ...
    @overload
    def __call__(self, fn: Callable[P, Awaitable[None] | None]) -> JobFunction[P]: ...
    def __call__(self, fn: Callable[..., Awaitable[None] | None]) -> JobFunction[Any]:
        return _build_job_function(fn, dict(self._options))


def _build_job_function(fn: JobFn, options: dict[str, Any]) -> JobFunction[Any]:
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    params = list(signature.parameters.values())
    takes_ctx = bool(params) and (
        hints.get(params[0].name) is JobContext or params[0].name in ("ctx", "context")
    )
    field_params = params[1:] if takes_ctx else params
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {}
    for p in field_params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"@job function {fn.__qualname__} cannot take *args or **kwargs")
        if p.name not in hints:
            raise TypeError(
                f"@job function {fn.__qualname__}: parameter `{p.name}` needs a type hint, "
                "so dispatch can check it"
            )
        annotations[p.name] = hints[p.name]
        if p.default is not p.empty:
            namespace[p.name] = p.default
    backoff_fn = options.pop("backoff", None)
    ordered_by = options.pop("ordering_key", None)
    if ordered_by is not None:
        namespace["ordering_key"] = _ordering_by(fn, ordered_by, [p.name for p in field_params])
    is_async = inspect.iscoroutinefunction(fn)
    names = [p.name for p in field_params]

    def call(self: Job, ctx: JobContext) -> Any:
        values = {n: getattr(self, n) for n in names}
        return fn(ctx, **values) if takes_ctx else fn(**values)

    if is_async:

        async def handle(self: Job, ctx: JobContext) -> object:
            return await call(self, ctx)

        namespace["handle"] = handle
    else:

        def handle_sync(self: Job, ctx: JobContext) -> object:
            return call(self, ctx)

        namespace["handle"] = handle_sync
    if backoff_fn is not None:
        namespace["backoff"] = lambda self, attempt: backoff_fn(attempt)
    namespace.update(options)
    namespace["__annotations__"] = annotations
    namespace["__module__"] = fn.__module__
    namespace["__qualname__"] = fn.__qualname__
    namespace["__doc__"] = fn.__doc__
    job_class = type(fn.__name__, (Job,), namespace)
    public_sig = signature.replace(parameters=field_params)
    return JobFunction(job_class, public_sig)


def _ordering_by(fn: JobFn, parameter: object, names: list[str]) -> Callable[[Job], str | None]:
    """`Job.ordering_key` for a `@job` function: the value of its parameter `parameter`."""
    if not isinstance(parameter, str) or parameter not in names:
        raise TypeError(
            f"@job function {fn.__qualname__}: ordering_key names the parameter whose value "
            f"orders the calls, one of {', '.join(names) or '(none: it takes no arguments)'}; "
            f"got {parameter!r}"
        )

    def ordering_key(self: Job) -> str | None:
        value = getattr(self, parameter)
        return None if value is None else str(value)

    return ordering_key


_ASYNC_HANDLERS: weakref.WeakKeyDictionary[type[Job], tuple[object, bool]] = (
    weakref.WeakKeyDictionary()
)


_RATE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_rate(text: str) -> tuple[int, timedelta]:
    """`"100/m"` as (100, one minute); `"10/30s"` as (10, 30 seconds). ValueError says how."""
    count, sep, period = text.strip().partition("/")
    period = period.strip()
    number, unit = period[:-1], period[-1:]
    try:
        starts = int(count)
        length = float(number) if number else 1.0
    except ValueError:
        starts, length = 0, 0.0
    if not sep or unit not in _RATE_UNITS or starts < 1 or length <= 0:
        raise ValueError(
            f"a rate is COUNT/PERIOD, such as 100/m, 5/s, 1000/h or 10/30s (a whole count of "
            f"at least 1, a period in s, m, h or d); got {text!r}"
        )
    return starts, timedelta(seconds=length * _RATE_UNITS[unit])


def _check_limits(cls: type[Job]) -> None:
    rate = cls.rate_limit
    if rate is not None:
        if not isinstance(rate, str):
            raise TypeError(f'{cls.__qualname__}.rate_limit is a string such as "100/m"')
        try:
            parse_rate(rate)
        except ValueError as exc:
            raise TypeError(f"{cls.__qualname__}.rate_limit: {exc}") from None
    limit: object = cls.concurrency_limit
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise TypeError(
            f"{cls.__qualname__}.concurrency_limit must be a whole number of at least 1 (or None)"
        )


def is_async_handler(job_class: type[Job]) -> bool:
    """Whether the job's `handle` is a coroutine function (else it runs in a thread).

    Asked for every job the worker runs, so the answer is kept per class,
    beside the `handle` it was given for: a class whose `handle` is replaced
    later is asked again.
    """
    handle = job_class.handle
    known = _ASYNC_HANDLERS.get(job_class)
    if known is not None and known[0] is handle:
        return known[1]
    answer = inspect.iscoroutinefunction(handle)
    _ASYNC_HANDLERS[job_class] = (handle, answer)
    return answer


def _kebab(name: str) -> str:
    out = "".join("-" + c.lower() if c.isupper() else c for c in name)
    return out.lstrip("-")
