"""The worker threads that run the API's appends and prepares, cheapest kind of call first.

    Workers(threads: int = 8)
    await workers.run(fn, *args, priority=APPEND) -> fn(*args), on a worker thread

A server process runs the library on a few threads (one runs Python at a time). With anyio's
thread pool, a request that finds every thread busy waits in arrival order, so a prepare (a few
ms of work when no compaction fires) waits as long behind the queued appends (each a write
transaction and the user-memory update) as they do: under load the queue, not the call, made a
prepare's latency. Here waiting calls are taken by ``priority`` (lower first: :data:`PREPARE`
before :data:`APPEND`), in arrival order within one priority; a call already running is never
interrupted, and a prepare only overtakes calls that have not started, so every call still runs
(appends keep the threads whenever no prepare waits).

The threads are started on first use and stopped by :meth:`Workers.close`. A call runs in a copy
of the caller's context variables, as with anyio. When the awaiting request is cancelled (the
client went away) before the call started, the call is skipped; once started it runs to its
end (a write must not be cut in half) and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import queue
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

PREPARE = 0
"""Priority of a prepare (and of anything as short): taken first."""
APPEND = 1
"""Priority of an append (and the default)."""

_STOP = (float("inf"), 0, None, (), None, None, None)


class Workers:
    """``threads`` worker threads taking calls by priority, then in arrival order (see the
    module docstring). ``threads`` must be at least 1 (ValueError)."""

    def __init__(self, threads: int = 8) -> None:
        if threads < 1:
            raise ValueError(f"threads={threads}: at least 1")
        self.threads = threads
        self._queue: queue.PriorityQueue[tuple[Any, ...]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._started: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any, priority: int = APPEND) -> T:
        """``fn(*args)`` on a worker thread, after the waiting calls of a lower ``priority``
        and the earlier ones of the same; returns its result or raises what it raised.
        RuntimeError after :meth:`close`."""
        if self._closed:
            raise RuntimeError("the server's workers are closed")
        self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        ctx = contextvars.copy_context()
        self._queue.put((priority, next(self._order), fn, args, ctx, loop, future))
        return await future

    def _start(self) -> None:
        if len(self._started) >= self.threads:
            return
        with self._lock:
            while len(self._started) < self.threads:
                t = threading.Thread(target=self._work, name=f"ctxwise-worker-{len(self._started)}", daemon=True)
                t.start()
                self._started.append(t)

    def _work(self) -> None:
        while True:
            _priority, _n, fn, args, ctx, loop, future = self._queue.get()
            if fn is None:
                return
            if future.done():  # the request was cancelled while the call waited
                continue
            try:
                result = ctx.run(fn, *args)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
                _deliver(loop, future, None, exc)
            else:
                _deliver(loop, future, result, None)

    def close(self) -> None:
        """Stop the threads once the calls already queued have run (waits for them)."""
        self._closed = True
        with self._lock:
            started = list(self._started)
        for _ in started:
            self._queue.put(_STOP)
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
