"""Authentication by construction (issue 24 item 5): every route of the app, enumerated from the
app itself (FastAPI's routes, the inspector's, and the hot path's), refuses a request with no
key, a wrong key, a revoked key (401) and another tenant's key (404, or that tenant's own empty
records), against a real server (SQLite and PostgreSQL). A route added later is enumerated
too: it needs a line here (its parameters) or it fails, and it is refused or it fails."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import APIRouter

from ctxwise.server.app import all_routes, require_key_check
from ctxwise.server.hot import ROUTES as HOT_ROUTES

from .conftest import Live, raw
from .test_isolation import CALL, SECRET, SID, USER, seed

PUBLIC = {
    ("GET", "/healthz"), ("GET", "/readyz"),  # liveness and readiness
    ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"),  # the docs
    ("GET", "/ui/static/{name}"),  # the inspector's stylesheet and script
    ("POST", "/ui/login"),  # the inspector's login form: it takes the key
    ("POST", "/ui/logout"),  # clears the caller's own cookie, reads nothing
}
"""The routes that need no key, each named on purpose."""

OWN_RECORDS = {
    ("GET", "/v1/sessions"), ("GET", "/v1/users/{user_id}/memory"), ("POST", "/v1/users/{user_id}/memory"),
    ("DELETE", "/v1/users/{user_id}/memory"),
    ("GET", "/ui"), ("GET", "/ui/fragment/sessions"), ("GET", "/ui/api/sessions-version"),
}
"""Routes where another tenant's key reaches that tenant's own (empty) records: 2xx, nothing of
the victim's in the answer, the victim's records unchanged."""


def values(seeded: dict[str, Any], message_id: str) -> dict[str, str]:
    """A value for every path and required query parameter of the app's routes, naming the
    victim's records (tenant acme's session, tool result, memory entry)."""
    return {"session_id": SID, "user_id": USER, "tool_use_id": CALL, "entry_id": str(seeded["entry"]),
            "user": USER, "id": SID, "message_id": message_id}


def bodies(seeded: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """A valid JSON body for every route that takes one (so the key, not the body, decides)."""
    return {
        ("POST", "/v1/sessions/{session_id}/messages"): {
            "format": "openai", "messages": [{"role": "user", "content": "x"}], "expected_version": seeded["version"]},
        ("POST", "/v1/sessions/{session_id}/prepare"): {},
        ("POST", "/v1/users/{user_id}/memory"): {"text": "a note"},
    }


def requests(live: Live, seeded: dict[str, Any], message_id: str) -> list[tuple[str, str, str, dict[str, str], Any]]:
    """``(method, route path, url, query, body)`` for every method of every route that is not
    :data:`PUBLIC`, built from the route's own parameters."""
    app = live.server.config.app
    given, body_of = values(seeded, message_id), bodies(seeded)
    out = []
    for route in all_routes(app):
        for method in sorted(set(getattr(route, "methods", None) or ()) - {"HEAD"}):
            if (method, route.path) in PUBLIC:
                continue
            dependant = getattr(route, "dependant", None)
            assert dependant is not None, f"{method} {route.path}: not a FastAPI route: list it in PUBLIC or test it"
            missing = [p.name for p in [*dependant.path_params, *dependant.query_params]
                       if p.name not in given and (p in dependant.path_params or p.field_info.is_required())]
            assert not missing, f"{method} {route.path}: give {missing} a value in values()"
            url = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: quote(given[m.group(1)], safe=""), route.path)
            query = {p.name: given[p.name] for p in dependant.query_params if p.field_info.is_required()}
            if dependant.body_params:
                assert (method, route.path) in body_of, f"{method} {route.path}: give it a body in bodies()"
            out.append((method, route.path, url, query, body_of.get((method, route.path))))
    return out


def test_every_route_refuses_no_key_a_wrong_key_a_revoked_key_and_another_tenants_key(live: Live):
    seeded = seed(live)
    a = live.client("a")
    before = a.get(f"/v1/sessions/{SID}/context", params={"user_id": USER}).json()
    message_id = next(m["id"] for m in before["messages"] if m["role"] == "tool")
    app = live.server.config.app
    sent = requests(live, seeded, message_id)
    paths = {(m, p) for m, p, *_ in sent}
    assert set(HOT_ROUTES) <= paths  # the hot path's routes are among the app's, and tested
    assert len([p for p in paths if p[1].startswith("/v1/")]) >= 12 and len([p for p in paths if p[1].startswith("/ui")]) >= 7
    answered = app.hot.answered
    clients = {"no key": live.client(None), "wrong key": live.client("ctxw_0123456789ab_" + "W" * 43),
               "revoked key": live.client("revoked"), "another tenant's key": live.client("b")}
    for who, client in clients.items():
        for method, path, url, query, body in sent:
            r = client.request(method, url, params=query, json=body)
            text = raw(r)
            assert SECRET not in text and "Traceback" not in text, (who, method, path, text)
            if who != "another tenant's key":
                assert r.status_code == 401, (who, method, path, r.status_code, text)
            elif (method, path) in OWN_RECORDS:
                assert 200 <= r.status_code < 300, (who, method, path, r.status_code, text)
            else:
                assert r.status_code == 404, (who, method, path, r.status_code, text)
    # the wrong, revoked and other tenant's keys on append and prepare were answered by the hot
    # path, through the same key check (no key at all goes to FastAPI, refused by the key's form)
    assert app.hot.answered - answered == 3 * len(HOT_ROUTES)
    # the victim's records are unchanged
    after = a.get(f"/v1/sessions/{SID}/context", params={"user_id": USER}).json()
    assert after["version"] == before["version"] and after["messages"] == before["messages"]
    memory = a.get(f"/v1/users/{USER}/memory").json()["entries"]
    assert [e["text"] for e in memory] == [f"prefers code {SECRET}"]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_an_app_with_a_v1_route_without_the_key_check_is_refused(live: Live):
    """Kind: a route added later that skips the key check (the check is a dependency of the /v1
    router; a route put on another router under /v1 would not have it)."""
    app = live.server.config.app
    require_key_check(app, app.state.key_check)  # the app as built passes
    sneaky = APIRouter()

    @sneaky.get("/v1/sneaky")
    def read_everything() -> dict[str, str]:
        return {"all": "of it"}

    app.include_router(sneaky)
    with pytest.raises(RuntimeError, match=r"/v1/sneaky has no API key check"):
        require_key_check(app, app.state.key_check)
