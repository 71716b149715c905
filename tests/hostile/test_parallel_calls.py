"""Kind of fault: work quadratic in the number of parallel tool calls of one message (issue 28,
low): 12,000 calls in one assistant message took 4.7 s, because the renderer's call-id pass
looked up each call's recorded id by counting the calls before it. The test counts Python
function calls (a deterministic count of work, not a time) for N and 2N calls: doubling N
must not quadruple it."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

import pytest

from ctxwise import ContextManager, Policy
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock


def _calls(fn: Callable[[], object]) -> int:
    """The number of function calls (Python and built-in) ``fn`` makes."""
    prof = cProfile.Profile()
    prof.runcall(fn)
    return pstats.Stats(prof).total_calls  # type: ignore[attr-defined, no-any-return]


def _work(n: int, provider: str) -> dict[str, int]:
    """Counted calls of appending one message of ``n`` parallel calls, its ``n`` results, and
    the prepare after them."""
    cm = ContextManager("memory://", Policy.preset("default", provider=provider, budget=10_000_000, unit="chars"))
    s = cm.session("u", "p")
    s.append([Message(id="s", role="system", blocks=[TextBlock(text="You are an agent.")]),
              Message(id="u", role="user", blocks=[TextBlock(text="check every store")])])
    calls = Message(id="a", role="assistant",
                    blocks=[ToolUseBlock(id=f"c{i}", name="stock", input={"store": i}) for i in range(n)])
    results = [Message(id=f"t{i}", role="tool", blocks=[ToolResultBlock(
        tool_use_id=f"c{i}", name="stock", output=[TextBlock(text=f"store {i}: 3 left")])]) for i in range(n)]
    out = {"append calls": _calls(lambda: s.append([calls])), "append results": _calls(lambda: s.append(results))}
    s.append([Message(id="a2", role="assistant", blocks=[TextBlock(text="all checked")])])
    out["prepare"] = _calls(s.prepare)
    cm.close()
    return out


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai_responses"])
def test_doubling_parallel_calls_does_not_quadruple_the_work(provider):
    small, big = _work(600, provider), _work(1200, provider)
    ratios = {k: big[k] / small[k] for k in small}
    assert all(r < 2.6 for r in ratios.values()), ratios
