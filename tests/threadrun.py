"""Run one worker in several threads and collect what they raised: the concurrency tests' harness."""

from __future__ import annotations

import threading
from typing import Callable


def run_threads(worker: Callable[[int], None], n: int, timeout: float = 120.0) -> list[BaseException]:
    """Call ``worker(k)`` for ``k`` in ``range(n)``, each in its own thread started at once, wait
    for them all (``timeout`` seconds each) and return what they raised, in no set order (empty:
    none did). A thread still running after its wait is reported as a ``TimeoutError``."""
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            worker(k)
        except BaseException as e:  # noqa: BLE001 - returned to the test, which asserts on it
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    errors += [TimeoutError(f"thread {k} still running after {timeout} s") for k, t in enumerate(threads) if t.is_alive()]
    return errors
