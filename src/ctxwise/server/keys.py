"""Tenants and API keys, stored hashed.

A key looks like ``ctxw_<key_id>_<secret>``: ``key_id`` (12 hex characters) is public and
names the key in ``ctxwise keys list`` and ``revoke``; ``secret`` (43 URL-safe characters,
256 random bits from :mod:`secrets`) is shown once, when the key is created. The database keeps
only the SHA-256 of the whole key (a secret of 256 random bits needs no slow hash: there is
nothing to brute-force), compared in constant time. Each key belongs to one tenant; a tenant
is a name (``acme``, ``team-7``: letters, digits, ``-`` and ``_``, at most 64 characters) and
exists as long as it has keys.

A key check is one round trip to the database: the server's reads run in autocommit (no
``BEGIN`` / ``ROLLBACK`` around a single ``SELECT``) on connections that are not pinged before
use; a connection found dead (the database restarted) is dropped and the read made once more on
a new one, so the first request after a restart is answered too.

The table, ``ctxwise_api_keys``, is created by ctxwise's own migrations (revision 0004) when a
store is opened on the database. Nothing here is cached: a key revoked through one server
process (or the CLI) is refused by every process on the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, TypeVar

from sqlalchemy import (Column, DateTime, Integer, MetaData, String, Table, bindparam, create_engine, insert, select,
                        update)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError

from ..store import QuickRead

TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""A tenant name: it prefixes the tenant's user ids in the store (``acme:alice``), so it never
contains the ``:`` separator."""

T = TypeVar("T")

_KEY = re.compile(r"^ctxw_([0-9a-f]{12})_([A-Za-z0-9_-]{20,128})$")
KEY_FORM = _KEY
"""What a key looks like (``ctxw_<key_id>_<secret>``); a key of another form is refused unread."""

metadata = MetaData()
api_keys = Table(
    "ctxwise_api_keys", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key_id", String(32), nullable=False, unique=True),
    Column("tenant", String(64), nullable=False, index=True),
    Column("name", String(255), nullable=False, default=""),
    Column("key_hash", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)
"""The table as revision 0004 creates it (the migration is the source of the DDL)."""


_ACTIVE_BY_KEY_ID = select(api_keys.c.tenant, api_keys.c.key_hash).where(
    api_keys.c.key_id == bindparam("key_id"), api_keys.c.revoked_at.is_(None))
"""The key check of :meth:`KeyStore.tenant_of`: the tenant and hash of an active key (no row
for an unknown or revoked one); its columns need no type conversion (:class:`~ctxwise.store.sql.QuickRead`)."""


TENANT_SEP = ":"
"""Between the tenant and the user id in the store's user ids (``acme:alice``)."""

KEY_LOOKUP = select((api_keys.c.tenant + TENANT_SEP).label("prefix"), api_keys.c.tenant, api_keys.c.key_hash,
                    api_keys.c.revoked_at).where(api_keys.c.key_id == bindparam("key_id"))
"""The key check as a one-row read whose first column is the key's user-id prefix
(``<tenant>:``): the server makes it together with a session's freshness read, in one
statement (:meth:`ctxwise.SqlStore.freshness_with`); :meth:`KeyStore.tenant_in` checks the row."""


class KeyError_(ValueError):
    """A bad ``keys`` request (an invalid tenant name, an unknown key id): one line for the CLI."""


@dataclass
class ApiKey:
    """One stored key (never its secret): ``key_id``, ``tenant``, ``name``, times in UTC."""

    key_id: str
    tenant: str
    name: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def as_dict(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "tenant": self.tenant, "name": self.name,
                "created_at": _iso(self.created_at), "revoked_at": _iso(self.revoked_at)}


def _iso(t: datetime | None) -> str | None:
    if t is None:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).isoformat()


def digest(key: str) -> str:
    """The stored form of a key: SHA-256 hex of its UTF-8 bytes."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def lookup_params(key: str | None) -> dict[str, str] | None:
    """The bound parameters of the key check (:data:`KEY_LOOKUP`) for ``key``; None for a
    missing or malformed key (nothing to read)."""
    m = _KEY.match(key or "")
    return None if m is None else {"key_id": m.group(1)}


def tenant_in(key: str | None, row: Any) -> str | None:
    """The tenant of ``key`` given its stored row (``tenant``, ``key_hash``, ``revoked_at``, by
    key id; None when there is none): None unless the row is active and its hash is the key's
    (compared in constant time)."""
    if row is None or row.revoked_at is not None:
        return None
    return _matching(key, row.tenant, row.key_hash)


def _matching(key: str | None, tenant: Any, key_hash: Any) -> str | None:
    """``tenant`` when ``key``'s digest is ``key_hash`` (compared in constant time), else None."""
    return str(tenant) if hmac.compare_digest(str(key_hash), digest(key or "")) else None


def check_tenant(tenant: str) -> str:
    """``tenant`` if it is a valid tenant name, else :class:`KeyError_` saying the rule."""
    if not isinstance(tenant, str) or not TENANT.match(tenant):
        raise KeyError_(f"tenant {tenant!r}: use 1-64 letters, digits, '-' or '_' (starting with a letter or digit)")
    return tenant


class KeyStore:
    """The API keys in the ctxwise database at ``url`` (an SQLAlchemy URL, the store's own).

    Open a store on the same URL first (``SqlStore(url)`` or a ``ContextManager``): its
    migrations create the table."""

    def __init__(self, url: str, *, engine: Engine | None = None) -> None:
        if engine is None:
            kwargs: dict[str, Any] = {}
            if make_url(url).get_backend_name() == "sqlite":
                kwargs = {"connect_args": {"timeout": 10.0}}
            engine = create_engine(url, **kwargs)
        self.engine = engine
        self.reader = engine.execution_options(isolation_level="AUTOCOMMIT") \
            if engine.dialect.name == "postgresql" else engine
        """The same pool for single-statement reads (the key check, the server's session
        freshness check): autocommit on PostgreSQL, one round trip per read."""
        self._active = QuickRead(engine, _ACTIVE_BY_KEY_ID,
                                 lambda params: self.read(lambda conn: conn.execute(_ACTIVE_BY_KEY_ID, params).first()))

    def read(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` on a :attr:`reader` connection; run once more on a fresh
        connection when the first one turns out dead (no ping before each use: a dead pooled
        connection is found by the read itself, and SQLAlchemy drops the pool's old ones)."""
        for attempt in (0, 1):
            try:
                with self.reader.connect() as conn:
                    return fn(conn)
            except DBAPIError as e:
                if attempt or not e.connection_invalidated:
                    raise
        raise AssertionError("unreachable")

    def create(self, tenant: str, name: str = "") -> tuple[str, ApiKey]:
        """A new key for ``tenant``: ``(the key itself, shown only now, its stored record)``."""
        check_tenant(tenant)
        key_id = secrets.token_hex(6)
        key = f"ctxw_{key_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(timezone.utc)
        with self.engine.begin() as conn:
            conn.execute(insert(api_keys).values(key_id=key_id, tenant=tenant, name=name[:255], key_hash=digest(key),
                                                 created_at=now))
        return key, ApiKey(key_id, tenant, name[:255], now)

    def list(self, tenant: str | None = None, *, include_revoked: bool = True) -> list[ApiKey]:
        """Keys, oldest first; one tenant's when ``tenant`` is given."""
        q = select(api_keys.c.key_id, api_keys.c.tenant, api_keys.c.name, api_keys.c.created_at,
                   api_keys.c.revoked_at).order_by(api_keys.c.id)
        if tenant is not None:
            q = q.where(api_keys.c.tenant == tenant)
        if not include_revoked:
            q = q.where(api_keys.c.revoked_at.is_(None))
        return self.read(lambda conn: [ApiKey(*row) for row in conn.execute(q)])

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke the key ``key_id`` (idempotent); :class:`KeyError_` when there is none."""
        with self.engine.begin() as conn:
            conn.execute(update(api_keys).where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
                         .values(revoked_at=datetime.now(timezone.utc)))
        found = [k for k in self.list() if k.key_id == key_id]
        if not found:
            raise KeyError_(f"no API key {key_id!r} (see `ctxwise keys list`)")
        return found[0]

    def tenant_of(self, key: str | None) -> str | None:
        """The tenant an active ``key`` belongs to; None for a missing, malformed, unknown or
        revoked key (one indexed read, no cache: :class:`~ctxwise.store.sql.QuickRead` on SQLite)."""
        params = lookup_params(key)
        if params is None:
            return None
        row = self._active(params)
        return None if row is None else _matching(key, row[0], row[1])

    def ever(self) -> bool:
        """Whether any key was ever created in this database (revoked ones count): one read.
        The inspector's local mode is for a database that never had one."""
        return bool(self.read(lambda conn: conn.execute(select(api_keys.c.id).limit(1)).first() is not None))

    def ping(self) -> None:
        """One read of the keys table (the readiness check); raises when the database is down."""
        self.read(lambda conn: conn.execute(select(api_keys.c.id).limit(1)).all())

    def close(self) -> None:
        self.engine.dispose()
