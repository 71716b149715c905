"""A tool loop's summary lists files by the policy's own tool rules (issue 26 leftover).

Fault kind covered: the summarizer keyed each call by the default resource keys only, so an
agent whose tools clearing reads through ``Policy.tool_rules`` (``{"open_doc": "doc"}``) had
its file reads and edits summarized as anonymous tool findings: the files it worked on were in
no "Files read" / "Files edited" list of the summary that replaced them."""

from __future__ import annotations

import re

from builders import assistant, results
from ctxwise import Policy
from ctxwise.messages import Message
from ctxwise.summarizers import DigestSummarizer
from ctxwise.summarizers.base import Summarizer, SummaryResult, ToolRulesSummarizer

from test_loop_summary import module, one_turn

RULES = {"open_doc": "doc", "patch_doc": "doc:edit"}


def section(text: str, name: str) -> str:
    """The lines of one section of a digest summary ('' when it is absent)."""
    m = re.search(rf"^{re.escape(name)}:\n((?:- .*\n?)*)", text, re.M)
    return m.group(1) if m else ""


def loop() -> list[Message]:
    r = assistant(calls=[("open_doc", {"doc": "src/pkg/geo.py"})])
    e = assistant(calls=[("patch_doc", {"doc": "src/pkg/geo.py", "before": "x + 1", "after": "x + 2"})])
    return [r, *results(r, [module(1)]), e, *results(e, ["patched"])]


def test_the_digest_lists_a_custom_tools_files_under_the_rules():
    s = DigestSummarizer()
    plain = s.summarize(loop(), None, 4_000).text
    ruled = s.summarize(loop(), None, 4_000, tool_rules=RULES).text
    assert "src/pkg/geo.py" not in section(plain, "Files read") + section(plain, "Files edited")
    assert "src/pkg/geo.py" in section(ruled, "Files read")
    assert "src/pkg/geo.py" in section(ruled, "Files edited")


def test_a_session_passes_its_policys_rules_to_the_summarizer():
    """One instruction then 60 reads by a tool the defaults cannot key (its file in ``doc``):
    with the rule, the loop's summaries list the files it read."""
    run = one_turn("openai", 60, tool="open_doc", arg="doc", tool_rules={"open_doc": "doc"})
    summaries = [m.text for m in run["payloads"][-1] if "Summary of the earlier" in m.text]
    assert summaries, "the loop was never summarized"
    assert "src/pkg/mod_0.py" in section(summaries[0], "Files read")


def test_only_a_summarizer_that_reads_rules_is_given_them():
    """A user's summarizer written to the :class:`Summarizer` protocol is called as before."""

    class Plain:
        name = "plain"

        def summarize(self, material, previous, target_chars, *, facts=()):
            return SummaryResult(text="summary")

    assert isinstance(Plain(), Summarizer) and not isinstance(Plain(), ToolRulesSummarizer)
    assert isinstance(DigestSummarizer(), ToolRulesSummarizer)
    assert Policy(tool_rules=RULES).tool_rules == RULES
