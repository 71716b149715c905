"""Griffe extension for the API reference: ctxwise's docstrings use Sphinx roles
(``:class:`~ctxwise.store.SessionStore```) and reST literal blocks (``Example::``); this turns
them into Markdown before mkdocstrings renders them: a role becomes inline code of the name
(the last part when written with ``~``), and a paragraph ending in ``::`` ends in ``:``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")
LITERAL = re.compile(r"(\S)::(\n\s*\n)")


def markdown(text: str) -> str:
    """``text`` with Sphinx roles as inline code and ``::`` paragraph ends as ``:``."""
    text = ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)
    return LITERAL.sub(r"\1:\2", text)


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring once, when its object is loaded."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
