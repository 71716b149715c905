"""The LangChain block of docs/frameworks.md runs as written: `model` is the scripted chat model playing back a
recorded tau2-bench turn, `tools` the recorded tools, `PROMPT` the recorded system prompt.
Kind: a documented snippet that does not run."""

from __future__ import annotations

import re
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "examples"))

from langchain_agent import ScriptedChatModel, as_ai_message, main, recorded_tools  # noqa: E402
from playback import recordings  # noqa: E402


def test_readme_langchain_block_runs(tmp_path, monkeypatch):
    readme = (REPO / "docs" / "frameworks.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "integrations.langchain" in b]
    rec = recordings(n=1)[0]
    model = ScriptedChatModel(script=[as_ai_message(m) for m in rec.turns[0].assistant])
    monkeypatch.chdir(tmp_path)
    ns = {"model": model, "tools": recorded_tools(rec), "PROMPT": rec.system}
    exec(compile(block, "docs/frameworks.md", "exec"), ns)
    values = ns["agent"].get_state({"configurable": {"thread_id": "chat-7"}}).values
    assert values["ctxwise"]["ctxwise"]["session_id"] == "chat-7:ctxwise"
    assert len(model.seen) == len(rec.turns[0].assistant)
    ns["cm"].close()


def test_langchain_example_runs_and_reports_compaction(capsys):
    main(turns_wanted=12)
    out = capsys.readouterr().out
    assert "12 turns" in out and "the agent state keeps all" in out
    assert re.search(r"compaction events: .*summarizing \d+", out), out
