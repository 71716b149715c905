"""The web inspector at ``/ui``: server-rendered pages over the store, updated live.

``make_router(server) -> fastapi.APIRouter`` (its paths carry the ``/ui`` prefix); the app of
:mod:`ctxwise.server.app` includes it. ``server`` is the app's ``Server``: the inspector reads
``server.manager.store`` (the :class:`~ctxwise.SessionStore`) and ``server.keys`` (the API
keys). Pages:

* ``GET /ui``: the sessions, most recently updated first, 50 a page; ``?q=`` keeps those whose
  user or session id contains the text (case-insensitive; among the 5,000 most recently updated);
* ``GET /ui/session?user=U&id=S``: one session: the context size per model call with the
  watermarks (the replay report's chart, :mod:`.calls`), the policy in force, the event
  timeline, and the transcript beside the context, aligned by message id; a cleared result,
  pruned thinking or a folded message opens to its original (``GET /ui/api/original``, read
  from the store, shown as text); summaries link to the messages they replaced;
* live: the page polls ``GET /ui/api/version`` (the session's version, one indexed read)
  every 1.5 s and swaps in ``GET /ui/fragment/session`` when it moved. Every request reads the
  store, so a write through any process (the library, the API, another server node) shows up.

**Who sees what.** When the database holds at least one active API key, every inspector
request needs one: ``POST /ui/login`` (the form the inspector shows) puts it in an HttpOnly,
SameSite=Strict cookie scoped to ``/ui`` (an ``Authorization: Bearer`` or ``X-API-Key`` header
works too), and the inspector shows only that key's tenant's sessions, under the user ids the
API uses; another tenant's session is 404, as in the API. When the database holds no active
key (``ctxwise serve --db ctxwise.db`` on a replay database), the inspector runs in
**local mode**: every session is shown, to clients on the loopback address only (others get
403). The pages load nothing from another origin and send a ``Content-Security-Policy`` of
``'self'``.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from .. import SessionInfo, SessionNotFound, SessionStore
from ..replay.report import CSS as REPORT_CSS
from . import pages
from .calls import session_calls

if TYPE_CHECKING:
    from .app import Server

COOKIE = "ctxwise_ui_key"
"""The cookie that carries the API key of an inspector login."""
PAGE = 50
"""Sessions per page of the list."""
SCAN = 5000
"""How many of the most recently updated sessions (of the tenant's, behind a key) a search
looks at."""
LOOPBACK = ("127.0.0.1", "::1", "localhost")
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


class Denied(Exception):
    """A request the inspector refuses: ``status`` 401 (no or bad key), 403 (local mode, not
    loopback) or 404 (no such session for this tenant)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class Viewer:
    """Who is looking: ``tenant`` (None in local mode, where every session is visible) and the
    mapping between the store's user ids and the ones shown (``<tenant>:<user>`` in the store,
    as the API writes them)."""

    def __init__(self, tenant: str | None) -> None:
        self.tenant = tenant

    def owns(self, stored_user: str) -> bool:
        return self.tenant is None or stored_user.startswith(f"{self.tenant}:")

    def shown(self, stored_user: str) -> str:
        return stored_user if self.tenant is None else stored_user.removeprefix(f"{self.tenant}:")

    def stored(self, user: str) -> str:
        return user if self.tenant is None else f"{self.tenant}:{user}"

    def label(self) -> str:
        return "local mode (no API key configured): every session" if self.tenant is None else f"tenant {self.tenant}"


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store"})


def make_router(server: "Server") -> APIRouter:
    """The inspector's routes over ``server`` (the app's ``Server``; see the module docstring).

    Reads ``server.manager.store`` and ``server.keys`` (``list(include_revoked=False)``,
    ``tenant_of(key)``) on every request; keeps nothing between requests."""
    router = APIRouter(include_in_schema=False)

    def store() -> SessionStore:
        return server.manager.store

    def viewer(request: Request) -> Viewer:
        keys = server.keys
        if not keys.list(include_revoked=False):
            host = request.client.host if request.client else ""
            if host not in LOOPBACK:
                raise Denied(403, "this server has no API key configured: the inspector answers on the loopback "
                                  "address only (create a key with `ctxwise keys create`)")
            return Viewer(None)
        key = request.cookies.get(COOKIE) or request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if key is None and auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
        tenant = keys.tenant_of(key) if key else None
        if tenant is None:
            raise Denied(401, "sign in with an API key")
        return Viewer(tenant)

    def guarded(request: Request, render: Any, *, as_json: bool = False) -> Response:
        try:
            return render(viewer(request))
        except (Denied, SessionNotFound) as exc:
            status, text = (exc.status, exc.text) if isinstance(exc, Denied) else (404, "no such session")
            if as_json:
                return JSONResponse({"error": text}, status_code=status, headers={"Cache-Control": "no-store"})
            if status == 401:
                return _html(login_page(text), 401)
            return _html(pages.message_page(status, "Not found" if status == 404 else "Not allowed", text), status)

    def visible_sessions(v: Viewer, query: str) -> tuple[list[SessionInfo], bool]:
        """The sessions ``v`` may see that match ``query``, newest first; and whether the
        scan reached the end of the table."""
        needle = query.strip().lower()
        out: list[SessionInfo] = []
        offset = 0
        prefix = None if v.tenant is None else f"{v.tenant}:"
        while offset < SCAN:
            batch = store().list_sessions(limit=500, offset=offset, user_prefix=prefix)
            for s in batch:
                if v.owns(s.user_id) and (not needle or needle in v.shown(s.user_id).lower()
                                          or needle in s.session_id.lower()):
                    out.append(s)
            if len(batch) < 500:
                return out, True
            offset += 500
        return out, False

    def list_body(v: Viewer, query: str, offset: int) -> tuple[str, str]:
        found, complete = visible_sessions(v, query)
        page = found[offset:offset + PAGE]
        body = pages.session_list(page, query=query, offset=offset, more=len(found) > offset + PAGE,
                                  shown_user=v.shown, scanned_all=complete)
        stamp = hashlib.sha256(repr([(s.user_id, s.session_id, s.version) for s in page]).encode()).hexdigest()[:16]
        return body, stamp

    @router.get("/ui")
    def sessions(request: Request, q: str = "", offset: int = 0) -> Response:
        def render(v: Viewer) -> Response:
            body, stamp = list_body(v, q, max(offset, 0))
            live = {"version": f"/ui/api/sessions-version?{_qs(q=q, offset=offset)}",
                    "fragment": f"/ui/fragment/sessions?{_qs(q=q, offset=offset)}", "current": stamp}
            return _html(pages.layout("Sessions", body, live=live, who=v.label()))
        return guarded(request, render)

    @router.get("/ui/fragment/sessions")
    def sessions_fragment(request: Request, q: str = "", offset: int = 0) -> Response:
        return guarded(request, lambda v: _html(list_body(v, q, max(offset, 0))[0]))

    @router.get("/ui/api/sessions-version")
    def sessions_version(request: Request, q: str = "", offset: int = 0) -> Response:
        return guarded(request, lambda v: _json({"version": list_body(v, q, max(offset, 0))[1]}), as_json=True)

    def owned(v: Viewer, user: str, session_id: str) -> str:
        """The store's user id for ``user``; SessionNotFound when the viewer may not see it or
        the ids cannot name a session (control characters, over 255 characters)."""
        stored = v.stored(user)
        if not v.owns(stored) or not _plausible(stored) or not _plausible(session_id):
            raise SessionNotFound("no such session")
        return stored

    def session_body(v: Viewer, user: str, session_id: str) -> tuple[str, int]:
        stored = owned(v, user, session_id)
        st = store().load(stored, session_id, include_hidden=True)
        transcript = store().transcript(stored, session_id)
        events = store().events(stored, session_id)
        calls = session_calls(st, events, transcript)
        return pages.session_live(st, transcript, events, calls, user), st.version

    @router.get("/ui/session")
    def session(request: Request, user: str, id: str) -> Response:
        def render(v: Viewer) -> Response:
            body, version = session_body(v, user, id)
            live = {"version": f"/ui/api/version?{_qs(user=user, id=id)}",
                    "fragment": f"/ui/fragment/session?{_qs(user=user, id=id)}", "current": str(version)}
            return _html(pages.layout(id, body, live=live, who=v.label()))
        return guarded(request, render)

    @router.get("/ui/fragment/session")
    def session_fragment(request: Request, user: str, id: str) -> Response:
        return guarded(request, lambda v: _html(session_body(v, user, id)[0]))

    @router.get("/ui/api/version")
    def version(request: Request, user: str, id: str) -> Response:
        def render(v: Viewer) -> Response:
            return _json({"version": store().version(owned(v, user, id), id)})
        return guarded(request, render, as_json=True)

    @router.get("/ui/api/original")
    def original(request: Request, user: str, id: str, message_id: str) -> Response:
        def render(v: Viewer) -> Response:
            stored = owned(v, user, id)
            store().version(stored, id)  # SessionNotFound for a session that is not this viewer's
            m = store().original(stored, id, message_id=message_id) if _plausible(message_id) else None
            if m is None:
                raise Denied(404, "no such message")
            return _json({"message_id": m.id, "text": pages.message_text(m)})
        return guarded(request, render, as_json=True)

    @router.post("/ui/login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        key = (form.get("key") or [""])[0].strip()
        if not key or server.keys.tenant_of(key) is None:
            return _html(login_page("missing, unknown or revoked API key"), 401)
        out = RedirectResponse("/ui", status_code=303)
        out.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/ui",
                       secure=request.url.scheme == "https")
        return out

    @router.post("/ui/logout")
    def logout() -> Response:
        out = RedirectResponse("/ui", status_code=303)
        out.delete_cookie(COOKIE, path="/ui")
        return out

    @router.get("/ui/static/{name}")
    def static(name: str) -> Response:
        headers = {"Cache-Control": "no-cache"}
        if name == "report.css":  # the replay report's stylesheet, as it is: the chart looks the same
            return Response(REPORT_CSS, media_type="text/css; charset=utf-8", headers=headers)
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        text = resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")
        return Response(text, media_type=STATIC[name], headers=headers)

    return router


def _qs(**params: Any) -> str:
    from urllib.parse import urlencode

    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


def _plausible(text: str) -> bool:
    """An id the store could hold: 1-255 characters, no control characters."""
    return 0 < len(text) <= 255 and not any(ord(c) < 32 or ord(c) == 127 for c in text)


def _json(value: Any) -> JSONResponse:
    return JSONResponse(value, headers={"Cache-Control": "no-store"})


def login_page(text: str) -> str:
    """The sign-in form: one field for an API key (kept in a cookie for ``/ui``)."""
    return pages.layout("Sign in", (
        f"<h1>Sign in</h1><p class='msgline'>{pages.e(text)}: this server has API keys configured, and the "
        "inspector shows the sessions of the key's tenant.</p><form class='search' method='post' action='/ui/login'>"
        "<input type='password' name='key' placeholder='ctxw_…' aria-label='API key' autocomplete='off'>"
        "<button type='submit'>Sign in</button></form>"))
