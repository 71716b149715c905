"""The ``arguments`` string of a tool call, shared by the chat and Responses renderers.

A leaf module (it imports only the message model), so the renderers and :mod:`.render`, which
picks among them, import it without importing each other.
"""

from __future__ import annotations

import json

from ..messages import ToolUseBlock


def call_arguments(b: ToolUseBlock) -> str:
    """The ``arguments`` JSON string of a call: the string the model wrote when a format
    reader kept it and it still parses to ``b.input``, else ``json.dumps(b.input)``."""
    for key in ("_openai", "_responses"):
        raw = (b.extra.get(key) or {}).get("arguments")
        if isinstance(raw, str):
            try:
                if json.loads(raw) == b.input:
                    return raw
            except json.JSONDecodeError:
                pass
    return json.dumps(b.input, ensure_ascii=False)
