"""The inspector's guards in real Chromium against `ctxwise serve`: a name that resolves to
127.0.0.1 but is not a local one (DNS rebinding, here Chromium's ``--host-resolver-rules``)
reads nothing in local mode; another site's page cannot sign the browser in.

Kinds covered: a page on another name reading every session of a local-mode inspector; login
CSRF (another site's form posting a key it chose).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.server.keys import KeyStore

from .test_ui_chromium import ARGS, CHROMIUM, Watched, serve

SECRET = "Order SEC-4471 ships to 12 Elm St."


@pytest.fixture(scope="module")
def rebinding_browser():
    """Chromium that resolves ``evil.test`` to 127.0.0.1, as a rebinding DNS server would."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (apt-get install -y chromium); the inspector tests need it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[*ARGS, "--host-resolver-rules=MAP evil.test 127.0.0.1"])
        yield b
        b.close()


def _db(d: Path, *, key: bool) -> tuple[str, str | None]:
    url = f"sqlite:///{d / 'guard.db'}"
    with ContextManager(url, Policy(budget=4000, unit="chars", provider="openai")) as cm:
        cm.session("alice", "chat-1").append_openai([{"role": "user", "content": SECRET}])
    made = None
    if key:
        ks = KeyStore(url)
        made = ks.create("acme", "browser")[0]
        ks.close()
    return url, made


def test_a_rebound_name_reads_nothing_in_local_mode(rebinding_browser, tmp_path):
    url, _ = _db(tmp_path, key=False)
    proc, base = serve(url, tmp_path)
    port = base.rsplit(":", 1)[1]
    try:
        page = rebinding_browser.new_page()
        r = page.goto(f"http://evil.test:{port}/ui/session?{urlencode({'user': 'alice', 'id': 'chat-1'})}")
        assert r is not None and r.status == 403
        assert "SEC-4471" not in page.content() and "alice" not in page.content()
        assert "CTXWISE_SERVER_ALLOWED_HOSTS" in page.content()
        # what a rebinding page's script would do: same-origin to evil.test, so it could read the answer
        got = page.evaluate("fetch('/ui/api/original?user=alice&id=chat-1&message_id=msg-000001')"
                            ".then(r => r.text().then(t => [r.status, t]))")
        assert got[0] == 403 and "SEC-4471" not in got[1]
        # the same server on a local name shows the session
        w = Watched(rebinding_browser, f"http://localhost:{port}")
        w.page.goto(f"http://localhost:{port}/ui/session?{urlencode({'user': 'alice', 'id': 'chat-1'})}")
        w.page.wait_for_selector("text=SEC-4471")
        assert w.problems == []
        w.close()
        page.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_another_site_cannot_sign_the_browser_in(rebinding_browser, tmp_path):
    url, key = _db(tmp_path, key=True)
    proc, base = serve(url, tmp_path)
    try:
        context = rebinding_browser.new_context()
        page = context.new_page()
        assert page.goto(base + "/ui").status == 401        # the victim has the inspector's form token cookie
        attack = (f"<form id='f' method='post' action='{base}/ui/login'><input name='key' value='{key}'>"
                  "<input name='csrf' value='" + "A" * 43 + "'></form><script>document.getElementById('f').submit()"
                  "</script>")
        page.route("http://evil.test/", lambda route: route.fulfill(status=200, content_type="text/html", body=attack))
        with page.expect_navigation(url=base + "/ui/login") as nav:
            page.goto("http://evil.test/")
        assert nav.value is not None and nav.value.status == 403
        assert "sign in again" in page.content()
        assert not any(c["name"] == "ctxwise_ui_key" for c in context.cookies())
        assert page.goto(base + "/ui").status == 401        # still signed out
        # the inspector's own form signs in
        page.fill("input[name=key]", key or "")
        page.click("form button")
        page.wait_for_url(base + "/ui")
        page.wait_for_selector("form.signout")               # signed in (acme has no sessions here)
        page.click("form.signout button")                   # and its sign-out form signs out
        page.wait_for_selector("input[name=key]")
        context.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
