"""The worker threads that run the API's appends and prepares, cheapest kind of call first.

    Workers(threads: int = 8, appends: int | None = None)
    await workers.run(fn, *args, priority=APPEND) -> fn(*args), on a worker thread

A server process runs the library on a few threads (one runs Python at a time). With anyio's
thread pool, a request that finds every thread busy waits in arrival order, so a prepare (a few
ms of work when no compaction fires) waits as long behind the queued appends (each a write
transaction and the user-memory update) as they do: under load the queue, not the call, made a
prepare's latency. Here waiting calls are taken by ``priority`` (lower first: :data:`PREPARE`
before :data:`APPEND`), in arrival order within one priority; a call already running is never
interrupted, and a prepare only overtakes calls that have not started, so every call still runs
(appends keep the threads whenever no prepare waits).

``appends`` caps the calls of priority :data:`APPEND` (or higher) running at once (None: no cap
beyond ``threads``); the other threads are left for prepares. Every running thread competes for
the process's one interpreter lock, and so does the event loop: with every thread running an
append, a prepare that got a thread still waited for the lock behind them at each step (its
start, its key check's database read, its answer), about 5 ms each under load. A waiting
append is still taken as soon as a running one ends.

The threads are started on first use and stopped by :meth:`Workers.close`. A call runs in a copy
of the caller's context variables, as with anyio. When the awaiting request is cancelled (the
client went away) before the call started, the call is skipped; once started it runs to its
end (a write must not be cut in half) and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

PREPARE = 0
"""Priority of a prepare (and of anything as short): taken first."""
APPEND = 1
"""Priority of an append (and the default)."""


class Workers:
    """``threads`` worker threads taking calls by priority, then in arrival order, at most
    ``appends`` of them appends (see the module docstring). ``threads`` and ``appends`` must be
    at least 1 (ValueError)."""

    def __init__(self, threads: int = 8, appends: int | None = None) -> None:
        if threads < 1:
            raise ValueError(f"threads={threads}: at least 1")
        if appends is not None and appends < 1:
            raise ValueError(f"appends={appends}: at least 1 (None: no cap)")
        self.threads = threads
        self.appends = min(appends, threads) if appends is not None else threads
        self._waiting: list[tuple[Any, ...]] = []  # a heap of (priority, arrival, fn, args, ctx, loop, future)
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._running_appends = 0
        self._started: list[threading.Thread] = []
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any, priority: int = APPEND) -> T:
        """``fn(*args)`` on a worker thread, after the waiting calls of a lower ``priority``
        and the earlier ones of the same; returns its result or raises what it raised.
        RuntimeError after :meth:`close`."""
        if self._closed:
            raise RuntimeError("the server's workers are closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        ctx = contextvars.copy_context()
        with self._cond:
            self._start()
            heapq.heappush(self._waiting, (priority, next(self._order), fn, args, ctx, loop, future))
            self._cond.notify()
        return await future

    def _start(self) -> None:
        while len(self._started) < self.threads:  # under self._cond
            t = threading.Thread(target=self._work, name=f"ctxwise-worker-{len(self._started)}", daemon=True)
            t.start()
            self._started.append(t)

    def _take(self) -> tuple[Any, ...] | None:
        """The next call this thread may run (under ``self._cond``), None once closed and drained."""
        while True:
            if self._waiting:
                first = self._waiting[0]
                if first[0] < APPEND or self._running_appends < self.appends:
                    heapq.heappop(self._waiting)
                    if first[0] >= APPEND:
                        self._running_appends += 1
                    return first
            elif self._closed:
                return None
            self._cond.wait()

    def _work(self) -> None:
        while True:
            with self._cond:
                item = self._take()
            if item is None:
                return
            priority, _n, fn, args, ctx, loop, future = item
            try:
                if future.done():  # the request was cancelled while the call waited
                    continue
                try:
                    result = ctx.run(fn, *args)
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
                    _deliver(loop, future, None, exc)
                else:
                    _deliver(loop, future, result, None)
            finally:
                if priority >= APPEND:  # this thread takes next the append the cap held back, if any
                    with self._cond:
                        self._running_appends -= 1

    def close(self) -> None:
        """Stop the threads once the calls already queued have run (waits for them)."""
        with self._cond:
            self._closed = True
            started = list(self._started)
            self._cond.notify_all()
        for t in started:
            t.join()


def _deliver(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any,
             exc: BaseException | None) -> None:
    def settle() -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the event loop is closed: nobody awaits the result any more
        pass
