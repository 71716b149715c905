"""The placeholder that replaces a cleared tool-result body in place.

A placeholder keeps what the model needs to go on without the body: the tool's name, its
input, the original size, the ``tool_use_id`` under which the original stays in the store (the
recall tool, :mod:`ctxwise.recall`, fetches it by that id), and, with the ``{values}`` field of
the default template, the body's key values inline: identifiers, amounts, dates, statuses and
names, distilled the way the seeds' layered truncator keeps "number, status, owner, updated"
of a ticket and drops the rest. The values are bounded (``placeholder_values_max`` characters,
cut only between whole values) and the text is a pure function of (body, input, id, name,
policy): byte-stable once written, so the cleared prefix stays identical across calls and the
prompt cache keeps serving it.

Code and logs get values of their own kind (:func:`work_values`) in place of the distilled ones:
a view of a file keeps its resource key (:mod:`ctxwise.resources`), the line range it
showed and the symbols it defines (``def`` / ``class`` / ``function`` / ``fn`` / ``func`` /
``defmodule`` / ``defp`` names; never CSS classes or numbers); a command's output keeps its
exit status and its verdict lines (pytest's ``2 failed, 69 passed``, ``FAILED`` / ``ERROR`` test
names, the first traceback or error line).
"""

from __future__ import annotations

import json
from typing import Any

from ..distill import distill, key_values  # noqa: F401  (key_values: re-exported)
from ..messages import ToolResultBlock, ToolUseBlock
from ..policy import Policy
from ..resources import access_of, shown_values



def render_input(tool_input: dict[str, Any], style: str, limit: int) -> str:
    """The tool input for a placeholder: ``{key=value, ...}`` (``kv``, Ragent's style) or
    compact JSON, cut to ``limit`` characters (an ellipsis marks a cut)."""
    if style == "kv":
        parts = [f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in tool_input.items()]
        s = "{" + ", ".join(parts) + "}"
    else:
        s = json.dumps(tool_input, ensure_ascii=False, separators=(", ", ": "))
    if limit and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return s


def recall_key(tool_use_id: str, message_id: str, reused: bool) -> str:
    """What a placeholder or a cut note names as the way back to an original: the
    ``tool_use_id``, and when the session's context holds more than one result under that id
    (tau-bench recordings reuse call ids) also the ``message_id`` of this one, so
    :func:`ctxwise.recall_tool_result` returns this body and never another call's."""
    return f"{tool_use_id}, message_id {message_id}" if reused else tool_use_id


def reused_ids(messages: list[Any]) -> set[str]:
    """The tool_use_ids that answer more than one tool result in ``messages``."""
    seen: set[str] = set()
    again: set[str] = set()
    for m in messages:
        for r in m.tool_results:
            (again if r.tool_use_id in seen else seen).add(r.tool_use_id)
    return again


def placeholder_text(policy: Policy, result: ToolResultBlock, tool_input: dict[str, Any],
                     key: str | None = None) -> str:
    """The placeholder for ``result`` under ``policy``. Template fields: ``{n}`` original length
    in characters, ``{name}``, ``{input}`` (see :func:`render_input`), ``{id}`` the
    ``tool_use_id`` (or ``key``, see :func:`recall_key`), ``{state}``, and ``{values}``:
    ``"key values: a=1, b=2; "`` (the body's :func:`distill` ed values, at most
    ``placeholder_values_max`` characters) or ``""``."""
    values = ""
    if "{values}" in policy.placeholder:
        values = work_values(result, tool_input, policy) or distill(result.text, policy.placeholder_values_max)
    return policy.placeholder.format(
        n=len(result.text),
        name=result.name or "tool",
        input=render_input(tool_input, policy.placeholder_input, policy.placeholder_input_max),
        id=key if key is not None else result.tool_use_id,
        state=result.state,
        values=f"{values}; " if values else "",
    )


def work_values(result: ToolResultBlock, tool_input: dict[str, Any], policy: Policy) -> str:
    """What a placeholder keeps of a view of code or of a command's output
    (:func:`ctxwise.resources.shown_values` at ``2 x placeholder_values_max`` characters, the
    call keyed under ``policy.tool_rules``, or by the defaults when they name a file and the
    rule does not); ``""`` when the call is neither or
    ``placeholder_values_max`` is 0."""
    limit = 2 * policy.placeholder_values_max
    if limit <= 0:
        return ""
    use = ToolUseBlock(id=result.tool_use_id or "call", name=result.name or "tool", input=dict(tool_input))
    acc = access_of(use, policy.tool_rules)
    if acc is None or not acc.key.startswith("path:"):  # a rule never loses the file a default key names
        base = access_of(use)
        acc = base if base is not None and base.key.startswith("path:") else acc
    return shown_values(result.text, acc, limit)
