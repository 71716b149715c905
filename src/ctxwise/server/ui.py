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

**Who sees what.** Once an API key has been created in the database (revoked ones count),
every inspector request needs an active one: ``POST /ui/login`` (the form the inspector shows)
puts it in an HttpOnly, SameSite=Strict cookie scoped to ``/ui`` (an ``Authorization: Bearer``
or ``X-API-Key`` header works too), and the inspector shows only that key's tenant's sessions,
under the user ids the API uses; another tenant's session is 404, as in the API. When no key
was ever created (``ctxwise serve --db ctxwise.db`` on a replay database), the inspector runs in
**local mode**: every session is shown, to a browser on this machine only, so a request is
refused (403) when it comes from an address that is not loopback, when it carries a proxy's
header (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``, ``X-Forwarded-Host``, ``Via``: a
same-host reverse proxy makes every client loopback), or when its ``Host`` is not ``localhost``,
``127.0.0.1``, ``[::1]`` or a name of ``server.allowed_hosts`` (a page on another name that
resolves to 127.0.0.1, DNS rebinding, reads nothing).

**Forms.** The sign-in and sign-out forms carry a token that must equal the HttpOnly,
SameSite=Strict cookie ``ctxwise_ui_csrf`` (double submit); a POST without both, with
``Sec-Fetch-Site`` other than ``same-origin`` / ``none``, or (from a browser that sends no
``Sec-Fetch-Site``) with an ``Origin`` of another host is refused (403) and changes nothing.
The pages load nothing from another origin and send a ``Content-Security-Policy`` of
``'self'``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from .. import PolicyError, SessionInfo, SessionNotFound, SessionStore
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
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The ``Host`` names local mode answers to, besides ``server.allowed_hosts``."""
PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip", "x-forwarded-host", "via")
"""Headers a reverse proxy adds: a request that carries one is not local."""
CSRF_COOKIE = "ctxwise_ui_csrf"
"""The cookie that holds the form token (double submit: each form carries the same value)."""
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{43}$")
_HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]{0,62})?(\.[a-z0-9]([a-z0-9-]{0,62})?)*)(:[0-9]{1,5})?$")
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


class Denied(Exception):
    """A request the inspector refuses: ``status`` 401 (no or bad key), 403 (local mode and
    not a local request; a form without its token) or 404 (no such session for this tenant)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class Viewer:
    """Who is looking: ``tenant`` (None in local mode, where every session is visible) and the
    mapping between the store's user ids and the ones shown (``<tenant>:<user>`` in the store,
    as the API writes them)."""

    def __init__(self, tenant: str | None, csrf: str = "") -> None:
        self.tenant = tenant
        self.csrf = csrf
        """The form token of this browser (the sign-out form carries it)."""

    def owns(self, stored_user: str) -> bool:
        return self.tenant is None or stored_user.startswith(f"{self.tenant}:")

    def shown(self, stored_user: str) -> str:
        return stored_user if self.tenant is None else stored_user.removeprefix(f"{self.tenant}:")

    def stored(self, user: str) -> str:
        return user if self.tenant is None else f"{self.tenant}:{user}"

    def label(self) -> str:
        return "local mode (no API key configured): every session" if self.tenant is None else f"tenant {self.tenant}"

    def page(self, title: str, body: str, live: dict[str, str] | None = None) -> str:
        """A whole page for this viewer: signed in, its header has the sign-out form."""
        return pages.layout(title, body, live=live, who=self.label(),
                            signout=self.csrf if self.tenant is not None else None)


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store"})


class Inspector:
    """What the inspector's routes share: ``server`` (the app's ``Server``), read on every
    request (``server.manager.store``, ``server.keys``, ``server.allowed_hosts``); nothing is
    kept between requests."""

    def __init__(self, server: "Server") -> None:
        self.server = server

    def store(self) -> SessionStore:
        found: SessionStore = self.server.manager.store
        return found

    def viewer(self, request: Request) -> Viewer:
        """Who ``request`` comes from; :class:`Denied` (401 / 403) when nobody may look."""
        token = form_token(request)
        keys = self.server.keys
        if not keys.ever():
            refuse_unless_local(request, getattr(self.server, "allowed_hosts", ()))
            return Viewer(None, token)
        key = request.cookies.get(COOKIE) or request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if key is None and auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
        tenant = keys.tenant_of(key) if key else None
        if tenant is None:
            raise Denied(401, "sign in with an API key")
        return Viewer(tenant, token)

    def guarded(self, request: Request, render: Any, *, as_json: bool = False) -> Response:
        """``render(viewer)``, or the page (or JSON) of the refusal it raised."""
        try:
            response: Response = render(self.viewer(request))
        except (Denied, SessionNotFound) as exc:
            status, text = (exc.status, exc.text) if isinstance(exc, Denied) else (404, "no such session")
            if as_json:
                return JSONResponse({"error": text}, status_code=status, headers={"Cache-Control": "no-store"})
            if status == 401:
                return login_response(request, text)
            return _html(pages.message_page(status, "Not found" if status == 404 else "Not allowed", text), status)
        return with_token(request, response)

    def visible_sessions(self, v: Viewer, query: str) -> tuple[list[SessionInfo], bool]:
        """The sessions ``v`` may see that match ``query``, newest first; and whether the
        scan reached the end of the table."""
        needle = query.strip().lower()
        out: list[SessionInfo] = []
        offset = 0
        prefix = None if v.tenant is None else f"{v.tenant}:"
        while offset < SCAN:
            batch = self.store().list_sessions(limit=500, offset=offset, user_prefix=prefix)
            for s in batch:
                if v.owns(s.user_id) and (not needle or needle in v.shown(s.user_id).lower()
                                          or needle in s.session_id.lower()):
                    out.append(s)
            if len(batch) < 500:
                return out, True
            offset += 500
        return out, False

    def list_body(self, v: Viewer, query: str, offset: int) -> tuple[str, str]:
        found, complete = self.visible_sessions(v, query)
        page = found[offset:offset + PAGE]
        body = pages.session_list(page, query=query, offset=offset, more=len(found) > offset + PAGE,
                                  shown_user=v.shown, scanned_all=complete)
        stamp = hashlib.sha256(repr([(s.user_id, s.session_id, s.version) for s in page]).encode()).hexdigest()[:16]
        return body, stamp

    @staticmethod
    def owned(v: Viewer, user: str, session_id: str) -> str:
        """The store's user id for ``user``; SessionNotFound when the viewer may not see it or
        the ids cannot name a session (control characters, over 255 characters)."""
        stored = v.stored(user)
        if not v.owns(stored) or not _plausible(stored) or not _plausible(session_id):
            raise SessionNotFound("no such session")
        return stored

    def session_body(self, v: Viewer, user: str, session_id: str) -> tuple[str, int]:
        stored = self.owned(v, user, session_id)
        st = self.store().load(stored, session_id, include_hidden=True)
        transcript = self.store().transcript(stored, session_id)
        events = self.store().events(stored, session_id)
        calls = session_calls(st, events, transcript)
        return pages.session_live(st, transcript, events, calls, user), st.version


def make_router(server: "Server") -> APIRouter:
    """The inspector's routes over ``server`` (the app's ``Server``; see the module docstring).

    Reads ``server.manager.store``, ``server.keys`` (``ever()``, ``tenant_of(key)``) and
    ``server.allowed_hosts`` on every request; keeps nothing between requests."""
    router = APIRouter(include_in_schema=False)
    ins = Inspector(server)
    _list_routes(router, ins)
    _session_routes(router, ins)
    _form_routes(router, ins)
    return router


def _list_routes(router: APIRouter, ins: Inspector) -> None:
    @router.get("/ui")
    def sessions(request: Request, q: str = "", offset: int = 0) -> Response:
        def render(v: Viewer) -> Response:
            body, stamp = ins.list_body(v, q, max(offset, 0))
            live = {"version": f"/ui/api/sessions-version?{_qs(q=q, offset=offset)}",
                    "fragment": f"/ui/fragment/sessions?{_qs(q=q, offset=offset)}", "current": stamp}
            return _html(v.page("Sessions", body, live=live))
        return ins.guarded(request, render)

    @router.get("/ui/fragment/sessions")
    def sessions_fragment(request: Request, q: str = "", offset: int = 0) -> Response:
        return ins.guarded(request, lambda v: _html(ins.list_body(v, q, max(offset, 0))[0]))

    @router.get("/ui/api/sessions-version")
    def sessions_version(request: Request, q: str = "", offset: int = 0) -> Response:
        return ins.guarded(request, lambda v: _json({"version": ins.list_body(v, q, max(offset, 0))[1]}),
                           as_json=True)


def _session_routes(router: APIRouter, ins: Inspector) -> None:
    @router.get("/ui/session")
    def session(request: Request, user: str, id: str) -> Response:
        def render(v: Viewer) -> Response:
            body, version = ins.session_body(v, user, id)
            live = {"version": f"/ui/api/version?{_qs(user=user, id=id)}",
                    "fragment": f"/ui/fragment/session?{_qs(user=user, id=id)}", "current": str(version)}
            return _html(v.page(id, body, live=live))
        return ins.guarded(request, render)

    @router.get("/ui/fragment/session")
    def session_fragment(request: Request, user: str, id: str) -> Response:
        return ins.guarded(request, lambda v: _html(ins.session_body(v, user, id)[0]))

    @router.get("/ui/api/version")
    def version(request: Request, user: str, id: str) -> Response:
        def render(v: Viewer) -> Response:
            return _json({"version": ins.store().version(ins.owned(v, user, id), id)})
        return ins.guarded(request, render, as_json=True)

    @router.get("/ui/api/original")
    def original(request: Request, user: str, id: str, message_id: str) -> Response:
        def render(v: Viewer) -> Response:
            stored = ins.owned(v, user, id)
            ins.store().version(stored, id)  # SessionNotFound for a session that is not this viewer's
            m = ins.store().original(stored, id, message_id=message_id) if _plausible(message_id) else None
            if m is None:
                raise Denied(404, "no such message")
            return _json({"message_id": m.id, "text": pages.message_text(m)})
        return ins.guarded(request, render, as_json=True)


def _form_routes(router: APIRouter, ins: Inspector) -> None:
    @router.post("/ui/login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        if not token_ok(request, form):
            return forged()
        key = (form.get("key") or [""])[0].strip()
        if not key or ins.server.keys.tenant_of(key) is None:
            return login_response(request, "missing, unknown or revoked API key")
        out = RedirectResponse("/ui", status_code=303)
        out.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/ui",
                       secure=request.url.scheme == "https")
        return out

    @router.post("/ui/logout")
    async def logout(request: Request) -> Response:
        if not token_ok(request, parse_qs((await request.body()).decode("utf-8", "replace"))):
            return forged()
        out = RedirectResponse("/ui", status_code=303)
        out.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
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


def _qs(**params: Any) -> str:
    from urllib.parse import urlencode

    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


def _plausible(text: str) -> bool:
    """An id the store could hold: 1-255 characters, no control characters."""
    return 0 < len(text) <= 255 and not any(ord(c) < 32 or ord(c) == 127 for c in text)


def _json(value: Any) -> JSONResponse:
    return JSONResponse(value, headers={"Cache-Control": "no-store"})


def login_page(text: str, token: str) -> str:
    """The sign-in form: one field for an API key (kept in a cookie for ``/ui``) and the form
    token ``token`` (:data:`CSRF_COOKIE`)."""
    return pages.layout("Sign in", (
        f"<h1>Sign in</h1><p class='msgline'>{pages.e(text)}: this server has API keys configured, and the "
        "inspector shows the sessions of the key's tenant.</p><form class='search' method='post' action='/ui/login'>"
        f"<input type='hidden' name='csrf' value='{pages.e(token)}'>"
        "<input type='password' name='key' placeholder='ctxw_…' aria-label='API key' autocomplete='off'>"
        "<button type='submit'>Sign in</button></form>"))


def login_response(request: Request, text: str) -> Response:
    """The sign-in page (401) saying ``text``, with this browser's form token."""
    return with_token(request, _html(login_page(text, form_token(request)), 401))


def form_token(request: Request) -> str:
    """This browser's form token: the :data:`CSRF_COOKIE` it sent when well-formed, else a new
    one (256 random bits, URL-safe; :func:`with_token` sets it)."""
    sent = request.cookies.get(CSRF_COOKIE, "")
    if _TOKEN.match(sent):
        return sent
    made = request.scope.setdefault("ctxwise_csrf", secrets.token_urlsafe(32))
    return str(made)


def with_token(request: Request, response: Response) -> Response:
    """``response``, setting the form token cookie when this request made a new token."""
    made = request.scope.get("ctxwise_csrf")
    if made is not None:
        response.set_cookie(CSRF_COOKIE, made, httponly=True, samesite="strict", path="/ui",
                            secure=request.url.scheme == "https")
    return response


def token_ok(request: Request, form: dict[str, list[str]]) -> bool:
    """Whether a form POST comes from the inspector's own page: its ``csrf`` field equals the
    :data:`CSRF_COOKIE` (compared in constant time), and ``Sec-Fetch-Site`` is ``same-origin``
    or ``none``; a browser that sends no ``Sec-Fetch-Site`` must send no ``Origin`` or one whose
    host is the request's ``Host`` (or ``X-Forwarded-Host``). ``Origin`` is not compared when
    ``Sec-Fetch-Site`` is there: a proxy may rewrite ``Host``."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.lower() not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if site is None and origin is not None:
        netloc = urlsplit(origin).netloc.lower() if origin.lower() != "null" else ""
        ours = {request.headers.get("host", "").lower(), request.headers.get("x-forwarded-host", "").lower()}
        if not netloc or netloc not in ours:
            return False
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = (form.get("csrf") or [""])[0]
    return bool(_TOKEN.match(cookie)) and hmac.compare_digest(cookie.encode(), sent.encode())


def forged() -> Response:
    """The answer to a form POST without its token (403; nothing changes)."""
    return _html(pages.message_page(403, "Not allowed", (
        "this request did not come from the inspector's own form (its token is missing or stale, or another "
        "site sent it): open /ui and sign in again")), 403)


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header, lowercased, without its port (``[::1]:8000`` is
    ``[::1]``); None when it is not a host name, an IPv4 address or a bracketed IPv6 one."""
    value = header.strip().lower()
    if not _HOST.match(value):
        return None
    return value[:value.index("]") + 1] if value.startswith("[") else value.split(":")[0]


def refuse_unless_local(request: Request, allowed: Any = ()) -> None:
    """Raise :class:`Denied` (403) unless ``request`` is a local one: from a loopback address,
    with no proxy header, to a ``Host`` of :data:`LOCAL_HOSTS` or ``allowed`` (names)."""
    fix = "create an API key with `ctxwise keys create --tenant NAME` and sign in with it"
    address = request.client.host if request.client else ""
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = address == "localhost"
    if not loopback:
        raise Denied(403, "this server has no API key configured: the inspector answers on the loopback "
                          f"address only ({fix})")
    proxied = next((h for h in PROXY_HEADERS if h in request.headers), None)
    if proxied is not None:
        raise Denied(403, f"this server has no API key configured, and this request came through a proxy "
                          f"({proxied}): local mode shows every session to a browser on this machine only ({fix})")
    name = host_name(request.headers.get("host", ""))
    if name is None or (name not in LOCAL_HOSTS and name not in tuple(allowed)):
        raise Denied(403, "this server has no API key configured, and local mode answers only to localhost, "
                          "127.0.0.1, [::1] and the names in CTXWISE_SERVER_ALLOWED_HOSTS (`ctxwise serve "
                          f"--allowed-host NAME`); this request named another host ({fix})")


def host_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` (the ``allowed_hosts`` of :func:`~ctxwise.server.create_app`) as the inspector
    compares them: lowercase, no port, blanks skipped. Raises
    :class:`~ctxwise.errors.PolicyError` for one that is not a host name."""
    out = []
    for raw in names:
        if raw.strip():
            name = host_name(raw)
            if name is None:
                raise PolicyError(f"CTXWISE_SERVER_ALLOWED_HOSTS: {raw.strip()!r} is not a host name",
                                  hint="give names such as ctxwise.lan or 10.0.0.5, separated by commas")
            out.append(name)
    return tuple(out)
