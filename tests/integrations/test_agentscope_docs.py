"""The AgentScope block of docs/frameworks.md runs as written (top-level await, as in a notebook): `model` is the
scripted model playing back a recorded tau2-bench turn, `tools` the recorded tools, `PROMPT` the
recorded system prompt. Kind: a documented snippet that does not run."""

from __future__ import annotations

import ast
import asyncio
import re
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))

from agentscope_agent import ScriptedModel, as_response, recorded_tools  # noqa: E402
from playback import recordings  # noqa: E402


def test_readme_agentscope_block_runs(tmp_path, monkeypatch):
    readme = (REPO / "docs" / "frameworks.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "integrations.agentscope" in b]
    rec = recordings(n=1)[0]
    model = ScriptedModel()
    model.script = [as_response(m) for m in rec.turns[0].assistant]
    monkeypatch.chdir(tmp_path)
    ns = {"model": model, "tools": recorded_tools(rec), "PROMPT": rec.system}
    code = compile(block, "docs/frameworks.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

    async def run() -> None:
        result = eval(code, ns)
        if result is not None:
            await result

    asyncio.run(run())
    assert ns["reply"].role == "assistant" and ns["reply"].get_text_content() == rec.turns[0].assistant[-1].text
    assert ns["agent"].state.middle_context["ctxwise"]["user_id"] == "user-42"
    assert len(model.seen) == len(rec.turns[0].assistant)
    ns["cm"].close()
