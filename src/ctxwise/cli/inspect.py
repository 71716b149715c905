"""``ctxwise inspect``: a recorded session's size by category (:mod:`ctxwise.replay.inspect`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from ..errors import CtxwiseError
from .console import fail, out


def inspect(
    path: Annotated[Optional[Path], typer.Argument(help="A recorded session file (any supported format). "
                                                        "Default: the built-in sample.", metavar="FILE")] = None,
) -> None:
    """Show each conversation's message count and size by category (chars and o200k tokens).

    Example: ctxwise inspect ../shared/data/long/swe-agent/sa_ctf_katy.json
    """
    from ..formats import load
    from ..replay.inspect import inspect_rows
    from ..replay.render import inspect_table
    from ..replay.sources import builtin

    target = path or builtin("sample")
    if target.is_dir():
        fail(f"{target}: is a directory; inspect takes one file")
    try:
        conversations = load(target)
    except CtxwiseError as e:
        fail(e)
    except OSError as e:
        fail(f"{target}: cannot read ({e.strerror or e})")
    name = "built-in sample" if path is None else str(target)
    rows = inspect_rows(conversations)
    detail = (f"{conversations[0].id}, {rows[0]['messages']} messages" if len(conversations) == 1
              else f"{len(conversations)} conversations")
    shape = conversations[0].format if conversations else "empty"
    out.print(f"[bold]{escape(name)}[/]: {escape(detail)} ({shape})", highlight=False)
    out.print(inspect_table(rows))
