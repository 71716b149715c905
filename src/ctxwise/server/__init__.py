"""ctxwise as a service: a JSON API over the engine, tenant API keys, the web inspector.

The ``server`` extra (``pip install 'ctxwise[server]'``: FastAPI and uvicorn). Run it with
``ctxwise serve`` or build the ASGI app yourself::

    from ctxwise.server import create_app
    app = create_app("postgresql+psycopg://...", policy=Policy.from_toml("policy.toml"))
    # uvicorn.run(app, host="127.0.0.1", port=8000)

Modules: :mod:`.app` (``create_app``, health and readiness, the error handlers, the request
size limit), :mod:`.core` (the ``Server``, its one key check in front of every ``/v1`` route,
errors as responses, request timing; the modules above import it, it imports none of them),
:mod:`.api` (the ``/v1`` routes), :mod:`.hot` (append and prepare ahead of FastAPI),
:mod:`.sessions` (the open sessions, a :class:`ctxwise.SessionPool`), :mod:`.keys` (tenants and
hashed API keys), :mod:`.errors` (ctxwise errors as JSON), and ``ui`` (the ``/ui`` inspector)
when present.
Like the CLI, the server uses only ``ctxwise``'s public surface.
"""

from __future__ import annotations

from ..errors import MissingExtra

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ModuleNotFoundError as _e:  # the extra is not installed: one line naming it
    raise MissingExtra("the ctxwise server", "server", (_e.name or "fastapi").split(".")[0]) from None

from .app import create_app, create_app_from_env  # noqa: E402

__all__ = ["create_app", "create_app_from_env"]
