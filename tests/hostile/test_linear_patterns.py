"""Kind of fault: super-linear regular expressions on user text and tool results.

Every pattern applied to text a user or a tool wrote (salient values, the fact and memory
extractors) must be linear in the length of that text. The rule checked here is structural,
so it fails on the code, not on a clock: no repeat in these patterns is unbounded (``+``,
``*``, ``{n,}``), so no match attempt can scan a long run, and the token-shaped patterns only
start where a run starts. Before this rule, a 64 KB run without spaces cost 15 s per append
(the e-mail pattern of the facts extractor) and 21 s per ``prepare()`` (the salient-value
pattern); bench/robustness.py measures the time now.
"""

from __future__ import annotations

import re
from re import _constants as sre_constants  # the parser behind re.compile (sre_parse is deprecated)
from re import _parser as sre_parse

import pytest

from ctxwise import salient, task
from ctxwise.memory import facts, patterns, user
from ctxwise.replay import metrics

MODULES = [salient, patterns, user, facts, metrics, task]
BOUND = 256  # the largest repeat bound allowed in a user-text pattern


def _compiled(module) -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for name, value in vars(module).items():
        if isinstance(value, re.Pattern):
            out.append((f"{module.__name__}.{name}", value))
        elif isinstance(value, list):  # e.g. PROFILE, ID_SLOTS, CURRENCY_NORM: tuples holding patterns
            for k, item in enumerate(value):
                for part in item if isinstance(item, tuple) else (item,):
                    if isinstance(part, re.Pattern):
                        out.append((f"{module.__name__}.{name}[{k}]", part))
    return out


def _unbounded(tree) -> list[str]:
    found = []
    for op, av in tree:
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
            lo, hi, sub = av
            if hi == sre_constants.MAXREPEAT or hi > BOUND:
                found.append(f"{{{lo},{'inf' if hi == sre_constants.MAXREPEAT else hi}}}")
            found += _unbounded(sub)
        elif op == sre_constants.SUBPATTERN:
            found += _unbounded(av[-1])
        elif op == sre_constants.BRANCH:
            for alt in av[1]:
                found += _unbounded(alt)
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            found += _unbounded(av[1])
    return found


PATTERNS = [p for m in MODULES for p in _compiled(m)]


def test_the_modules_hold_patterns():
    assert len(PATTERNS) > 40


@pytest.mark.parametrize("name,pattern", PATTERNS, ids=[n for n, _ in PATTERNS])
def test_no_unbounded_repeat(name, pattern):
    bad = _unbounded(sre_parse.parse(pattern.pattern, pattern.flags))
    assert not bad, f"{name} has unbounded repeats {bad}: bound them (at most {BOUND})"


RUNS = {
    "letters": "a" * 20000, "digits": "7" * 20000, "hex": "3f9a" * 5000, "base64": "aB3+/" * 4000,
    "dash": "a-" * 10000, "underscore": "a_" * 10000, "dots": "a." * 10000, "commas": "1," * 10000,
    "cjk": "我" * 20000, "cjk-digits": "一" * 20000,
}


@pytest.mark.parametrize("kind", sorted(RUNS))
def test_long_runs_find_nothing_spurious(kind):
    """A long unbroken run is one token at most: no value is carved out of its middle, and
    the extractors return (the salient-value scan and the fact/memory deciders)."""
    text = f"My order is #W2378156 and {RUNS[kind]} thanks."
    values = salient.salient_values(text)
    assert "W2378156" in values
    assert all(len(v) <= 129 for v in values)
    from ctxwise.messages import text_message

    fs = facts.extract_facts(text_message("m1", "user", text))
    assert any(f.value == "#W2378156" for f in fs)
    assert user.decide(text, [])


def test_pasted_material_is_read_at_its_edges_only():
    """Kind: extraction whose cost grows with pasted material (a 600 KB message took seconds
    per append). Of a clause over MAX_CLAUSE_CHARS only the words around the material are
    read: values stated there become facts with short verbatim text, values inside the
    material do not; a sentence over MAX_SENTENCE_CHARS is never a memory candidate."""
    from ctxwise.messages import text_message

    filler = "lorem ipsum dolor " * 4000
    text = f"My order is #W2378156 and {filler} order #W9999999 inside {filler} my email is a@b.com"
    fs = facts.extract_facts(text_message("m1", "user", text))
    values = {f.value for f in fs}
    assert "#W2378156" in values and "a@b.com" in values and "#W9999999" not in values, values
    assert all(len(f.text) <= facts.MAX_CLAUSE_CHARS for f in fs)
    ops = user.decide("I prefer aisle seats " + "and window views " * 200, [])
    assert [op.op for op in ops] == ["NOOP"] and "pasted" in ops[0].reason


@pytest.mark.parametrize("raw, ok", [({"city": "Paris"}, {"city": "Paris"}), ('{"city": "Paris"}', {"city": "Paris"}),
                                     ("Paris", None), ('["Paris"]', None), (42, None)])
def test_anthropic_tool_use_input_is_kept_or_refused_never_emptied(raw, ok):
    """Kind: a field passed in a shape the reader did not expect, replaced by an empty value
    without a word (a string tool_use input was stored and sent as {})."""
    from ctxwise import ContextManager, Policy
    from ctxwise.errors import FormatError

    s = ContextManager("memory://", Policy(provider="anthropic", budget=50_000, unit="chars")).session("u", "s")
    s.append_anthropic({"messages": [{"role": "user", "content": "weather?"}]})
    reply = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": raw}]}
    if ok is None:
        with pytest.raises(FormatError):
            s.append_anthropic([reply])
        assert len(s.messages) == 1
    else:
        s.append_anthropic([reply])
        assert s.messages[-1].tool_uses[0].input == ok


def test_input_nested_too_deep_is_a_format_error_and_stores_nothing():
    """Kind: a raw Python exception for a user's input (RecursionError from tool arguments
    "[" * 5000 or a tool input 3,000 objects deep) instead of a ctxwise error."""
    from ctxwise import ContextManager, Policy
    from ctxwise.errors import FormatError

    s = ContextManager("memory://", Policy(provider="openai", budget=50_000, unit="chars")).session("u", "s")
    s.append_openai([{"role": "user", "content": "hi"}])
    deep_text = "[" * 5000 + "]" * 5000
    deep: dict = {}
    cur = deep
    for _ in range(3000):
        cur["a"] = {}
        cur = cur["a"]
    calls = [
        lambda: s.append_openai([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep_text}}]}]),
        lambda: s.append_anthropic([{"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": deep}]}]),
    ]
    for call in calls:
        with pytest.raises(FormatError, match=r"message \d.*nested .*deep"):
            call()
        assert [m.role for m in s.messages] == ["user"]
    s.append_openai([{"role": "assistant", "content": "hello"}])
    assert s.prepare().payload[-1]["content"] == "hello"


@pytest.mark.parametrize("call", ["openai-name", "anthropic-key"])
def test_a_field_of_the_wrong_type_is_a_format_error_naming_it(call):
    """Kind: a raw pydantic ValidationError for a user's input (``"name": 5``; a tool input
    with a non-string key) instead of a ctxwise error naming the field."""
    from ctxwise import ContextManager, Policy
    from ctxwise.errors import FormatError

    s = ContextManager("memory://", Policy(provider="openai", budget=50_000, unit="chars")).session("u", "s")
    with pytest.raises(FormatError, match=r"name|key"):
        if call == "openai-name":
            s.append_openai([{"role": "user", "content": "x", "name": 5}])
        else:
            s.append_anthropic([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": {1: "x"}}]}])
    assert s.messages == []
