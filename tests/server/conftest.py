"""A real ctxwise server for the API tests: uvicorn on 127.0.0.1, a free port, the real store
(a SQLite file, or a fresh PostgreSQL schema through the root conftest's ``store_url``), and
API keys of two tenants plus a revoked one."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

from ctxwise import Policy
from ctxwise.server import create_app
from ctxwise.server.keys import KeyStore

POLICY = Policy.preset("default", budget=4000, unit="tokens", tokenizer="o200k_base")
"""A budget the recorded conversations outgrow, so compaction fires over HTTP too."""


@dataclass
class Live:
    """One running server: ``url`` (``http://127.0.0.1:PORT``), the store URL it serves, and
    keys: ``a`` and ``a2`` (tenant ``acme``), ``b`` (tenant ``globex``), ``revoked`` (acme's,
    revoked)."""

    url: str
    store_url: str
    keys: dict[str, str]
    key_ids: dict[str, str]
    server: Any = None
    thread: Any = None
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, key: str | None = "a", **headers: str) -> httpx.Client:
        """An httpx client on the server with ``keys[key]`` as bearer token (None: no key)."""
        h = dict(headers)
        if key is not None:
            h["Authorization"] = f"Bearer {self.keys.get(key, key)}"
        c = httpx.Client(base_url=self.url, headers=h, timeout=60)
        self.clients.append(c)
        return c


def start_server(store_url: str, policy: Policy = POLICY, **kwargs: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    """``create_app(store_url, policy)`` under uvicorn in a thread, on a free port of 127.0.0.1."""
    app = create_app(store_url, policy, **kwargs)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


def stop_server(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(timeout=30)


def make_keys(store_url: str) -> tuple[dict[str, str], dict[str, str]]:
    ks = KeyStore(store_url)
    try:
        made = {"a": ks.create("acme", "tests"), "a2": ks.create("acme", "second"), "b": ks.create("globex", "tests"),
                "revoked": ks.create("acme", "revoked")}
        ks.revoke(made["revoked"][1].key_id)
    finally:
        ks.close()
    return {k: v[0] for k, v in made.items()}, {k: v[1].key_id for k, v in made.items()}


@pytest.fixture
def live(store_url: str) -> Iterator[Live]:
    """A running server on an empty store (SQLite and PostgreSQL)."""
    server, thread, url = start_server(store_url)
    keys, ids = make_keys(store_url)
    lv = Live(url=url, store_url=store_url, keys=keys, key_ids=ids, server=server, thread=thread)
    try:
        yield lv
    finally:
        for c in lv.clients:
            c.close()
        stop_server(server, thread)


def raw(response: httpx.Response) -> str:
    """The response body as text, for leak checks."""
    return response.content.decode("utf-8", "replace")


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
