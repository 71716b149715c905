"""Who the inspector answers, over a real uvicorn server and a real SQLite store: local mode
(no API key was ever created) only for a browser on this machine, reached by a loopback name;
a login that only the inspector's own form can make.

Kinds covered: every tenant's sessions shown to anyone once the last key is revoked; a
loopback client behind a reverse proxy (every client of a same-host proxy) taken for a local
one; a page on another name resolved to 127.0.0.1 (DNS rebinding) reading sessions; a
cross-site form signing a browser in (login CSRF) or out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ctxwise import ContextManager, Policy
from ctxwise.server.keys import KeyStore

from .conftest import start_server, stop_server

SECRET = "Order SEC-4471 ships to 12 Elm St."


def _db(tmp_path: Path) -> str:
    """A SQLite store with one session holding :data:`SECRET` (written through the library)."""
    url = f"sqlite:///{tmp_path / 'inspector.db'}"
    with ContextManager(url, Policy(budget=4000, unit="chars", provider="openai")) as cm:
        cm.session("alice", "chat-1").append_openai([{"role": "user", "content": SECRET}])
    return url


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A server in local mode (no key ever created): ``(base URL, store URL)``."""
    url = _db(tmp_path)
    server, thread, base = start_server(url, allowed_hosts=["inspector.internal"])
    try:
        yield base, url
    finally:
        stop_server(server, thread)


def _get(base: str, path: str = "/ui", **headers: str) -> httpx.Response:
    return httpx.get(base + path, headers=headers, timeout=30, follow_redirects=False)


def test_local_mode_serves_a_loopback_browser(local):
    base, _ = local
    port = base.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST", "inspector.internal"):
        r = _get(base, "/ui/session?user=alice&id=chat-1", Host=host)
        assert r.status_code == 200 and "SEC-4471" in r.text, host


def test_revoking_every_key_does_not_fall_back_to_local_mode(local):
    base, url = local
    ks = KeyStore(url)
    try:
        key, record = ks.create("acme", "only key")
        assert _get(base).status_code == 401                       # keys exist: sign in
        ks.revoke(record.key_id)
        assert ks.list(include_revoked=False) == []
    finally:
        ks.close()
    for headers in ({}, {"X-Forwarded-For": "127.0.0.1"}, {"Forwarded": "for=127.0.0.1"}):
        for path in ("/ui", "/ui/session?user=alice&id=chat-1", "/ui/api/version?user=alice&id=chat-1"):
            r = _get(base, path, **headers)
            assert r.status_code == 401, (headers, path, r.status_code)
            assert "SEC-4471" not in r.text and "alice" not in r.text
    r = _get(base, "/ui", Authorization=f"Bearer {key}")           # the revoked key itself
    assert r.status_code == 401 and "alice" not in r.text


@pytest.mark.parametrize("header", [("X-Forwarded-For", "127.0.0.1"), ("X-Forwarded-For", "203.0.113.9, 127.0.0.1"),
                                    ("Forwarded", "for=127.0.0.1;proto=http"), ("X-Real-IP", "127.0.0.1")])
def test_a_loopback_client_behind_a_proxy_is_not_local(local, header):
    base, _ = local
    for path in ("/ui", "/ui/session?user=alice&id=chat-1", "/ui/api/original?user=alice&id=chat-1&message_id=x"):
        r = _get(base, path, **{header[0]: header[1]})
        assert r.status_code == 403, (header, path, r.status_code)
        assert "SEC-4471" not in r.text and "alice" not in r.text
        assert "ctxwise keys create" in r.text                     # says how to get out


@pytest.mark.parametrize("host", ["evil.test", "evil.test:8000", "127.0.0.1.nip.io", "localhost.evil.test",
                                  "[::2]", ""])
def test_a_foreign_host_name_is_refused_in_local_mode(local, host):
    base, _ = local
    for path in ("/ui", "/ui/session?user=alice&id=chat-1", "/ui/fragment/sessions",
                 "/ui/api/version?user=alice&id=chat-1"):
        r = _get(base, path, Host=host)
        assert r.status_code == 403, (host, path, r.status_code)
        assert "SEC-4471" not in r.text and "alice" not in r.text
        assert "CTXWISE_SERVER_ALLOWED_HOSTS" in r.text


def test_allowed_hosts_come_from_the_environment(tmp_path: Path):
    from ctxwise.server import create_app_from_env

    url = _db(tmp_path)
    env = {"CTXWISE_DB": url, "CTXWISE_SERVER_ALLOWED_HOSTS": " ctx.lan , Other.Example:8080 "}
    app = create_app_from_env(env)
    try:
        assert app.state.server.allowed_hosts == ("ctx.lan", "other.example")
    finally:
        app.state.server.close()


# -- CSRF -------------------------------------------------------------------------------------------


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A server with one active key: ``(base URL, key)``."""
    url = _db(tmp_path)
    ks = KeyStore(url)
    key = ks.create("acme", "browser")[0]
    ks.close()
    server, thread, base = start_server(url, allowed_hosts=["inspector.internal"])
    try:
        yield base, key
    finally:
        stop_server(server, thread)


def _form_token(page: str) -> str:
    m = re.search(r"name='csrf' value='([^']+)'", page)
    assert m, page
    return m.group(1)


def test_the_sign_in_form_carries_a_token_bound_to_a_strict_cookie(keyed):
    base, key = keyed
    with httpx.Client(base_url=base, timeout=30) as c:
        r = c.get("/ui")
        assert r.status_code == 401
        token = _form_token(r.text)
        cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("ctxwise_ui_csrf="))
        assert token in cookie and "samesite=strict" in cookie.lower() and "httponly" in cookie.lower()
        assert _form_token(c.get("/ui").text) == token             # one token per browser: tabs agree
        r = c.post("/ui/login", data={"key": key, "csrf": token})
        assert r.status_code == 303
        login = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("ctxwise_ui_key="))
        assert "samesite=strict" in login.lower() and "httponly" in login.lower()
        assert c.get("/ui").status_code == 200


def test_a_proxy_that_rewrites_host_does_not_break_sign_in(keyed):
    """nginx's default ``Host`` is the upstream's name; a browser's ``Origin`` is the public one."""
    base, key = keyed
    with httpx.Client(base_url=base, timeout=30) as c:
        token = _form_token(c.get("/ui").text)
        r = c.post("/ui/login", data={"key": key, "csrf": token},
                   headers={"Origin": "https://ctxwise.example.com", "Sec-Fetch-Site": "same-origin", "Host": "ctxwise"})
        assert r.status_code == 303


@pytest.mark.parametrize("attack", ["no token", "no cookie", "wrong token", "other origin", "cross-site fetch"])
def test_a_cross_site_login_is_refused(keyed, attack):
    base, key = keyed
    with httpx.Client(base_url=base, timeout=30) as c:
        token = _form_token(c.get("/ui").text)
        data = {"key": key, "csrf": token}
        headers: dict[str, str] = {}
        if attack == "no token":
            data.pop("csrf")
        elif attack == "no cookie":
            c.cookies.clear()
        elif attack == "wrong token":
            data["csrf"] = "x" * len(token)
        elif attack == "other origin":
            headers["Origin"] = "http://evil.test"
        else:
            headers["Sec-Fetch-Site"] = "cross-site"
        r = c.post("/ui/login", data=data, headers=headers)
        assert r.status_code == 403, (attack, r.status_code)
        assert not any(v.startswith("ctxwise_ui_key=") for k, v in r.headers.multi_items() if k == "set-cookie")
        assert "sign in again" in r.text
        assert c.get("/ui").status_code == 401                     # not signed in


def test_signing_out_needs_the_token_too(keyed):
    base, key = keyed
    with httpx.Client(base_url=base, timeout=30) as c:
        token = _form_token(c.get("/ui").text)
        assert c.post("/ui/login", data={"key": key, "csrf": token}).status_code == 303
        page = c.get("/ui")
        assert page.status_code == 200 and _form_token(page.text) == token   # the sign-out form
        r = c.post("/ui/logout", headers={"Origin": "http://evil.test"}, data={"csrf": token})
        assert r.status_code == 403 and c.get("/ui").status_code == 200      # still signed in
        assert c.post("/ui/logout", data={}).status_code == 403
        r = c.post("/ui/logout", data={"csrf": token})
        assert r.status_code == 303
        assert c.get("/ui").status_code == 401


def test_a_bad_allowed_host_is_refused_when_the_app_is_built(tmp_path: Path):
    from ctxwise import PolicyError
    from ctxwise.server import create_app

    with pytest.raises(PolicyError, match="CTXWISE_SERVER_ALLOWED_HOSTS: 'evil host/x' is not a host name") as info:
        create_app(_db(tmp_path), allowed_hosts=["ctx.lan", "evil host/x"])
    assert info.value.hint and "comma" in info.value.hint


def test_ctxwise_serve_takes_allowed_hosts(tmp_path: Path):
    import subprocess
    import sys
    import time

    from .test_ui_chromium import free_port

    url = _db(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ctxwise", "serve", "--db", url, "--port", str(port),
                                 "--allowed-host", "ctx.lan", "--allowed-host", "box.local", "--log-level", "warning"],
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        for host, status in (("ctx.lan", 200), (f"box.local:{port}", 200), ("evil.test", 403)):
            r = _get(base, "/ui/session?user=alice&id=chat-1", Host=host)
            assert r.status_code == status and ("SEC-4471" in r.text) == (status == 200), host
    finally:
        proc.terminate()
        proc.wait(timeout=20)
