"""The server's worker threads (ctxwise.server.workers): waiting calls are taken cheapest kind
first (prepares before appends), in arrival order within a kind, and every call still runs
once; at most ``appends`` appends run at once, the other threads left for prepares; errors
reach the awaiting request; a call whose request went away before it started is skipped, one
that started runs to its end."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from ctxwise.server.workers import APPEND, PREPARE, Workers


async def _queued_behind(workers: Workers, gate: threading.Event, calls: list[tuple[str, int]],
                         done: list[str]) -> list[str]:
    """Occupy every thread until ``gate`` opens, queue ``calls`` (name, priority) in that
    order, open the gate; the order the calls ran in."""
    started = threading.Semaphore(0)

    def hold() -> None:
        started.release()
        gate.wait(10)

    holders = [asyncio.ensure_future(workers.run(hold)) for _ in range(workers.threads)]
    for _ in range(workers.threads):
        while not started.acquire(timeout=0.01):
            await asyncio.sleep(0.01)
    tasks = [asyncio.ensure_future(workers.run(done.append, name, priority=p)) for name, p in calls]
    await asyncio.sleep(0.05)  # every call is queued before a thread frees up
    gate.set()
    await asyncio.gather(*holders, *tasks)
    return done


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("calls, expected", [
    ([("a1", APPEND), ("a2", APPEND), ("p1", PREPARE)], ["p1", "a1", "a2"]),
    ([("p1", PREPARE), ("a1", APPEND), ("p2", PREPARE), ("a2", APPEND), ("p3", PREPARE)],
     ["p1", "p2", "p3", "a1", "a2"]),
    ([("a1", APPEND), ("a2", APPEND), ("a3", APPEND)], ["a1", "a2", "a3"]),
    ([("p1", PREPARE), ("p2", PREPARE)], ["p1", "p2"]),
])
def test_waiting_prepares_go_before_waiting_appends_in_arrival_order(threads, calls, expected):
    workers = Workers(threads)
    try:
        order = asyncio.run(_queued_behind(workers, threading.Event(), calls, []))
    finally:
        workers.close()
    if threads == 1:
        assert order == expected
    else:  # two threads take the first two of the order at once; they may finish either way round
        assert sorted(order[:2]) == sorted(expected[:2]) and order[2:] == expected[2:]


def test_a_prepare_arriving_later_does_not_interrupt_a_running_append():
    workers = Workers(1)
    log: list[str] = []
    gate = threading.Event()

    def append() -> str:
        log.append("append start")
        gate.wait(10)
        log.append("append end")
        return "appended"

    async def main() -> tuple[str, str]:
        a = asyncio.ensure_future(workers.run(append, priority=APPEND))
        while not log:
            await asyncio.sleep(0.01)
        p = asyncio.ensure_future(workers.run(log.append, "prepare", priority=PREPARE))
        await asyncio.sleep(0.05)
        gate.set()
        return await a, str(await p)

    try:
        assert asyncio.run(main()) == ("appended", "None")
    finally:
        workers.close()
    assert log == ["append start", "append end", "prepare"]


@pytest.mark.parametrize("exc", [ValueError("bad input"), KeyError("k"), RuntimeError("x")])
def test_an_error_reaches_the_awaiting_request_and_the_thread_keeps_serving(exc):
    workers = Workers(1)

    def boom() -> None:
        raise exc

    async def main() -> int:
        with pytest.raises(type(exc)):
            await workers.run(boom, priority=PREPARE)
        return await workers.run(lambda: 41 + 1)

    try:
        assert asyncio.run(main()) == 42
    finally:
        workers.close()


def test_a_call_whose_request_went_away_before_it_started_is_skipped():
    workers = Workers(1)
    ran: list[str] = []
    gate = threading.Event()

    async def main() -> None:
        hold = asyncio.ensure_future(workers.run(gate.wait, 10))
        await asyncio.sleep(0.05)
        gone = asyncio.ensure_future(workers.run(ran.append, "gone"))
        kept = asyncio.ensure_future(workers.run(ran.append, "kept"))
        await asyncio.sleep(0.05)
        gone.cancel()
        gate.set()
        await hold
        await kept

    try:
        asyncio.run(main())
    finally:
        workers.close()
    assert ran == ["kept"]


def test_context_variables_reach_the_call_and_close_waits_for_queued_calls():
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    workers = Workers(2)
    ran: list[str] = []

    def slow(tag: str) -> str:
        time.sleep(0.05)
        ran.append(tag)
        return var.get()

    async def main() -> str:
        var.set("the request's")
        return await workers.run(slow, "first")

    assert asyncio.run(main()) == "the request's"
    workers.close()
    assert ran == ["first"]
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(workers.run(slow, "late"))


@pytest.mark.parametrize("threads", [0, -1])
def test_a_pool_without_threads_is_refused(threads):
    with pytest.raises(ValueError, match="at least 1"):
        Workers(threads)


@pytest.mark.parametrize("appends", [0, -2])
def test_a_cap_of_no_appends_is_refused(appends):
    with pytest.raises(ValueError, match="appends=.*at least 1"):
        Workers(2, appends)


def test_appends_over_the_cap_wait_while_a_prepare_takes_a_free_thread():
    """3 threads, at most 2 appends: with 2 appends running, a third append waits although a
    thread is free, and a prepare arriving after it runs on that thread at once; the third
    append starts when a running one ends, and every call runs once."""
    workers = Workers(3, appends=2)
    assert workers.appends == 2
    gate = threading.Event()
    log: list[str] = []
    lock = threading.Lock()
    running = threading.Semaphore(0)

    def append(name: str) -> str:
        with lock:
            log.append(f"{name} start")
        running.release()
        if name != "a3":
            gate.wait(10)
        with lock:
            log.append(f"{name} end")
        return name

    async def main() -> list[str]:
        a = [asyncio.ensure_future(workers.run(append, name)) for name in ("a1", "a2")]
        for _ in a:
            while not running.acquire(timeout=0.01):
                await asyncio.sleep(0.01)
        a3 = asyncio.ensure_future(workers.run(append, "a3"))
        await asyncio.sleep(0.05)  # a free thread, and a3 waiting: the cap holds it back
        with lock:
            assert log == ["a1 start", "a2 start"]
        prepared = await asyncio.wait_for(workers.run(lambda: "prepared", priority=PREPARE), 10)
        with lock:
            assert log == ["a1 start", "a2 start"]  # the prepare ran while both appends still ran
        gate.set()
        return [*(await asyncio.gather(*a, a3)), prepared]

    try:
        assert asyncio.run(main()) == ["a1", "a2", "a3", "prepared"]
    finally:
        workers.close()
    assert log.index("a3 start") > min(log.index("a1 end"), log.index("a2 end"))
    assert sorted(log) == sorted(f"{n} {w}" for n in ("a1", "a2", "a3") for w in ("start", "end"))


def test_the_cap_is_at_most_the_threads_and_none_means_all():
    assert Workers(3, appends=8).appends == 3
    assert Workers(3).appends == 3


@pytest.mark.parametrize("env, threads, appends", [({}, 8, 4), ({"CTXWISE_SERVER_APPEND_THREADS": "2"}, 8, 2),
                                                   ({"CTXWISE_SERVER_THREADS": "3"}, 3, 3)])
def test_the_server_takes_its_threads_and_append_cap_from_the_environment(tmp_path, env, threads, appends):
    from ctxwise.server import create_app_from_env

    app = create_app_from_env({"CTXWISE_DB": f"sqlite:///{tmp_path / 'c.db'}", **env})
    try:
        workers = app.state.server.workers
        assert (workers.threads, workers.appends) == (threads, appends)
    finally:
        app.state.server.close()


@pytest.mark.parametrize("name, raw", [("CTXWISE_SERVER_APPEND_THREADS", "0"), ("CTXWISE_SERVER_APPEND_THREADS", "-1"),
                                       ("CTXWISE_SERVER_APPEND_THREADS", "abc"), ("CTXWISE_SERVER_THREADS", "abc"),
                                       ("CTXWISE_SERVER_SESSION_CACHE", "-2"), ("CTXWISE_SERVER_MAX_BODY", "1.5")])
def test_a_bad_server_setting_is_refused_naming_the_variable(tmp_path, name, raw):
    """Kind: a server setting in the environment that is not an integer in range: one line
    naming the variable and the value, before the store is opened (not "cannot open the
    store", not a traceback)."""
    from ctxwise.errors import PolicyError
    from ctxwise.server import create_app_from_env

    with pytest.raises(PolicyError, match=f"^{name}={raw!r}: must be an integer >= "):
        create_app_from_env({"CTXWISE_DB": f"sqlite:///{tmp_path / 'c.db'}", name: raw})
    assert not (tmp_path / "c.db").exists()  # failed before the store was opened
