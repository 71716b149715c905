"""A running stub upstream and a running ctxwise server (uvicorn, a SQLite file) whose proxy
routes point at it, with tenant keys of two tenants."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctxwise import Policy
from ctxwise.proxy.routes import Upstreams
from ctxwise.server import create_app
from ctxwise.server.keys import KeyStore

from .stub import Stub, serve

POLICY = Policy.preset("default", budget=6000, unit="tokens", tokenizer="o200k_base")

REPLY_DELAY = 60.0
"""A reply waits for its session's next call (however slow the machine); :meth:`Live.settle`
stores the rest (tests/proxy/test_replies.py runs the writer thread's own delay)."""

PROVIDER_KEY = "sk-provider-SECRET-d41d8cd98f00b204"
"""The provider key the clients send: it must reach the stub and nothing else."""


@dataclass
class Live:
    """The stub (``stub``), the proxy's ``url``, the store URL and ``keys``: ``a`` (tenant acme),
    ``b`` (tenant globex)."""

    stub: Stub
    url: str
    store_url: str
    keys: dict[str, str]
    app: Any

    def settle(self) -> None:
        """Store the replies the proxy still holds (:mod:`ctxwise.proxy.replies`), as its next
        call or its writer thread would: a test reads the store after this."""
        self.app.proxy.replies.flush()

    @property
    def openai_base(self) -> str:
        return self.url + "/v1"


class _Holder:
    url = ""


def start(tmp_path: Path, policy: Policy = POLICY) -> tuple[Live, list[Any]]:
    stub = Stub()
    s_server, s_thread = stub.start()
    store_url = f"sqlite:///{tmp_path / 'proxy.db'}"
    app = create_app(store_url, policy)
    app.proxy.upstreams = Upstreams(openai=stub.url + "/v1", anthropic=stub.url)  # type: ignore[attr-defined]
    app.proxy.replies.delay = REPLY_DELAY  # type: ignore[attr-defined]
    holder = _Holder()
    p_server, p_thread = serve(app, holder)
    ks = KeyStore(store_url)
    try:
        keys = {"a": ks.create("acme", "t")[0], "b": ks.create("globex", "t")[0]}
    finally:
        ks.close()
    return Live(stub, holder.url, store_url, keys, app), [(s_server, s_thread), (p_server, p_thread)]


@contextmanager
def running(tmp_path: Path, policy: Policy = POLICY) -> Iterator[Live]:
    """:func:`start`, and both servers stopped on leaving."""
    lv, servers = start(tmp_path, policy)
    try:
        yield lv
    finally:
        for server, thread in servers:
            server.should_exit = True
            thread.join(timeout=30)


@pytest.fixture
def live(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[Live]:
    caplog.set_level(logging.DEBUG)
    with running(tmp_path) as lv:
        yield lv
