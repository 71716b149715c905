"""The inspector behind API keys, in real Chromium against `ctxwise serve`: a key's tenant sees
its own sessions only, under the user ids the API uses; another tenant's session is "not found"
(404, as in the API); no key or a revoked key gets the sign-in form; an append over the HTTP API
shows on the open page without a reload.

Kinds covered: one tenant's data reaching another tenant's browser; a revoked key still
opening pages; an API write not reaching the inspector.
"""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
import pytest

from ctxwise.server.keys import KeyStore

from .test_ui_chromium import Watched, browser, serve  # noqa: F401  (the browser fixture)


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    d = tmp_path_factory.mktemp("tenants")
    db = f"sqlite:///{d / 't.db'}"
    from ctxwise import ContextManager

    ContextManager(db).close()  # creates the schema, the keys table included
    ks = KeyStore(db)
    keys = {name: ks.create(tenant, name)[0] for name, tenant in (("acme", "acme"), ("globex", "globex"))}
    revoked, record = ks.create("acme", "old")
    ks.revoke(record.key_id)
    ks.close()
    keys["revoked"] = revoked
    proc, base = serve(db, d)
    api = {name: httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60)
           for name, key in keys.items()}
    for name, text in (("acme", "Acme's order ACME-1 is late."), ("globex", "Globex invoice GLX-7 is wrong.")):
        r = api[name].post("/v1/sessions/chat-1/messages", params={"user_id": "alice"},
                           json={"format": "openai", "messages": [{"role": "user", "content": text}]})
        assert r.status_code == 200, r.text
    yield base, keys, api
    for c in api.values():
        c.close()
    proc.terminate()
    proc.wait(timeout=20)


def sign_in(w: Watched, base: str, key: str) -> None:
    """The sign-in form (a 401 page, on purpose: not a problem), then the key."""
    page = w.page
    page.goto(base + "/ui")
    assert w.problems and all("401" in p for p in w.problems)
    w.problems.clear()
    page.fill("input[name=key]", key)
    page.click("form button")
    page.wait_for_url(base + "/ui")


def test_a_tenant_sees_only_its_own_sessions(tenants, browser):  # noqa: F811
    base, keys, _ = tenants
    w = Watched(browser, base)
    page = w.page
    page.goto(base + "/ui")
    assert page.locator("input[name=key]").count() == 1              # no key: the sign-in form
    assert "alice" not in page.content()
    sign_in(w, base, keys["acme"])
    assert page.locator("table.sessions tr").count() - 1 == 1
    assert page.locator("table.sessions td").nth(1).inner_text() == "alice"   # the API's user id, no prefix
    page.click("a.sess")
    page.wait_for_selector("text=ACME-1")
    assert "GLX-7" not in page.content() and "globex" not in page.content()
    assert w.problems == []
    # globex's session under the same user and session ids is acme's own; a guessed prefix is not found
    page.goto(f"{base}/ui/session?{urlencode({'user': 'globex:alice', 'id': 'chat-1'})}")
    assert page.locator("h1").inner_text() == "Not found"
    r = httpx.get(f"{base}/ui/api/original", params={"user": "globex:alice", "id": "chat-1", "message_id": "msg-000001"},
                  headers={"Authorization": f"Bearer {keys['acme']}"})
    assert r.status_code == 404 and "GLX" not in r.text
    # ids no store can hold are "not found" too, never a database error
    acme = {"Authorization": f"Bearer {keys['acme']}"}
    for params in ({"user": "alice\x00", "id": "chat-1"}, {"user": "alice", "id": "x" * 300},
                   {"user": "alice", "id": "chat-1", "message_id": "m\x00"}):
        r = httpx.get(f"{base}/ui/api/original", params={"message_id": "msg-000001", **params}, headers=acme)
        assert r.status_code == 404, (params, r.text)
    w.close()


def test_a_revoked_key_gets_the_sign_in_form(tenants, browser):  # noqa: F811
    base, keys, _ = tenants
    w = Watched(browser, base)
    page = w.page
    page.goto(base + "/ui")
    page.fill("input[name=key]", keys["revoked"])
    page.click("form button")
    page.wait_for_selector("input[name=key]")
    assert "alice" not in page.content()
    r = httpx.get(f"{base}/ui/session", params={"user": "alice", "id": "chat-1"},
                  headers={"Authorization": f"Bearer {keys['revoked']}"})
    assert r.status_code == 401 and "ACME" not in r.text
    w.close()


def test_an_append_over_the_api_appears_without_reload(tenants, browser):  # noqa: F811
    base, keys, api = tenants
    w = Watched(browser, base)
    page = w.page
    sign_in(w, base, keys["globex"])
    page.goto(f"{base}/ui/session?{urlencode({'user': 'alice', 'id': 'chat-1'})}")
    page.wait_for_selector("text=GLX-7")
    page.evaluate("window.__same_page = 'yes'")
    r = api["globex"].post("/v1/sessions/chat-1/messages", params={"user_id": "alice"},
                           json={"format": "openai", "messages": [
                               {"role": "assistant", "content": "Invoice GLX-7 is corrected; credit note CN-552."}]})
    assert r.status_code == 200, r.text
    page.wait_for_selector(".tcell >> text=CN-552", timeout=15_000)
    assert page.evaluate("window.__same_page") == "yes"
    assert w.problems == []
    w.close()
