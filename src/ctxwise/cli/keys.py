"""``ctxwise keys``: the server's API keys (create, list, revoke) over :mod:`ctxwise.server.keys`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import MissingExtra
from .console import DEFAULT_DB, command, fail, open_sql_store, out
from .serve import KeysDb

if TYPE_CHECKING:
    from ..server.keys import KeyStore

app = typer.Typer(help="API keys of the server: create, list, revoke.", no_args_is_help=True)


def _keys(db: str) -> KeyStore:
    """The key store at ``db`` (opening a store on it first creates the table); one
    ``error:`` line without the server extra."""
    try:
        from ..server.keys import KeyStore
    except MissingExtra as e:
        fail(e)
    open_sql_store(db, must_exist=False).close()
    return KeyStore(db)


@command(app, "create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="The tenant the key belongs to (letters, digits, - and _).",
                                        metavar="NAME")],
    name: Annotated[str, typer.Option(help="A note saying what the key is for.", metavar="TEXT")] = "",
    db: KeysDb = DEFAULT_DB,
) -> None:
    """Create an API key for a tenant and print it (shown only now; only its hash is stored).

    Example: ctxwise keys create --tenant acme --name "support bot"
    """
    from ..server.keys import KeyError_

    try:
        key, record = _keys(db).create(tenant, name)
    except KeyError_ as e:
        fail(str(e))
    out.print(f"created key {record.key_id} for tenant {record.tenant} (shown once, store it now):", highlight=False)
    print(key)


@command(app, "list")
def keys_list(
    tenant: Annotated[Optional[str], typer.Option(help="Only this tenant's keys.", metavar="NAME")] = None,
    db: KeysDb = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List API keys (ids, tenants, names, times; never the keys).

    Example: ctxwise keys list --tenant acme
    """
    from rich.table import Table

    found = _keys(db).list(tenant)
    if json_out:
        out.print_json(json.dumps([k.as_dict() for k in found]))
        return
    t = Table(title=f"API keys ({len(found)})")
    for col in ("key id", "tenant", "name", "created", "revoked"):
        t.add_column(col)
    for k in found:
        d = k.as_dict()
        t.add_row(k.key_id, k.tenant, k.name, d["created_at"] or "", d["revoked_at"] or "")
    out.print(t)


@command(app, "revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (see `ctxwise keys list`).")],
    db: KeysDb = DEFAULT_DB,
) -> None:
    """Revoke an API key: every server process refuses it from the next request on.

    Example: ctxwise keys revoke 3f2a9c01d4e5
    """
    from ..server.keys import KeyError_

    try:
        record = _keys(db).revoke(key_id.strip())
    except KeyError_ as e:
        fail(str(e))
    out.print(f"revoked key {record.key_id} of tenant {record.tenant}", highlight=False)
