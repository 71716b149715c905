"""Fresh oversized results are cut head and tail with the recall note in the middle, in
proportion at every size (a ~2 MB log keeps something, its verdict included); the recall tool
returns any original, however large, in pages."""

from __future__ import annotations

import pytest

from builders import assistant, results, system, user
from ctxwise import ContextManager, Policy
from ctxwise.compaction import Budgeting, compact
from ctxwise.compaction.trimming import head_and_tail
from ctxwise.recall import RECALL_PAGE_CHARS, recall_tool_output
from ctxwise.summarizers import DigestSummarizer
from ctxwise.tokens import get_counter


def pytest_log(lines: int) -> str:
    body = "\n".join(f"tests/test_mod.py::test_case_{k} PASSED" for k in range(lines))
    return ("============ test session starts ============\nplatform linux -- Python 3.11\n" + body +
            "\nFAILED tests/test_mod.py::test_widths - AssertionError\n====== 2 failed, 69 passed in 3.2s ======")


@pytest.mark.parametrize("lines", [300, 3_000, 60_000])  # ~12 KB, ~130 KB, ~2.6 MB
def test_a_fresh_log_too_big_to_fit_keeps_its_head_and_its_verdict(lines):
    log = pytest_log(lines)
    call = assistant(calls=[("bash", {"command": "pytest -q"})])
    msgs = [system(), user("Run the tests."), call, *results(call, [log])]
    b = Budgeting(Policy.preset("default", budget=2_000, unit="tokens"), get_counter("o200k_base"))
    out = compact(msgs, b, DigestSummarizer())
    assert out.size_after <= b.level(1.0)
    text = out.messages[-1].tool_results[0].text
    head, rest = text.split("\n[ctxwise cut ", 1)
    note, tail = rest.split("]\n", 1)
    assert "from the middle" in note and f'recall_tool_result("{call.tool_uses[0].id}")' in note
    assert log.startswith(head) and log.endswith(tail)
    assert "2 failed, 69 passed" in tail and "test_session starts".replace("_", " ") in head
    assert len(head) > 100 and len(tail) > 50  # something of both ends, whatever the size


def test_the_cut_is_proportional():
    text = "\n".join("x" * 79 for _ in range(25_000))  # 2 MB
    small, large = head_and_tail(text, 0.001, "k"), head_and_tail(text, 0.01, "k")
    assert 0 < len(small) < len(large) < 0.02 * len(text)
    assert len(large) > 0.009 * len(text)


def test_recall_returns_a_huge_original_in_pages(tmp_path):
    big = "".join(f"line {k:07d}\n" for k in range(200_000))  # 2.6 MB
    call = assistant(calls=[("bash", {"command": "cat big.log"})])
    with ContextManager(f"sqlite:///{tmp_path}/r.db", Policy.preset("default", budget=4_000, unit="tokens")) as cm:
        s = cm.session("u", "s")
        s.append([system(), user("Read the log."), call, *results(call, [big])])
        s.prepare()
        key = call.tool_uses[0].id
        got, offset, pages = "", 0, 0
        while True:
            text, err = recall_tool_output(s, {"tool_use_id": key, "offset": offset})
            assert not err and len(text) <= RECALL_PAGE_CHARS + 200
            pages += 1
            body, sep, note = text.partition("\n[ctxwise: characters ")
            got += body
            if not sep:
                break
            offset = int(note.split("offset=")[1].rstrip(")]"))
        assert got == big and pages > 1
        text, err = recall_tool_output(s, {"tool_use_id": key, "offset": len(big) + 1})
        assert err and "past the end" in text
        text, err = recall_tool_output(s, {"tool_use_id": key, "offset": -3})
        assert err
