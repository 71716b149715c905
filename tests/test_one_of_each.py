"""One of each (issue 24, item 4): one Counter protocol with a public registry, one cost model
that both decides and measures, one typed model for ctxwise's marker in ``metadata["ctxwise"]``.

Real components only: real tokenizers, a real SQLite file, real sessions.
"""

from __future__ import annotations

import ast
import itertools
import json
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ctxwise
from ctxwise import ContextManager, FormatError, Marker, Message, Policy, PolicyError, TokenCounter, text_message
from ctxwise.messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.prices import ANTHROPIC, DEEPSEEK, FLAT, OPENAI, PriceModel, call_costs, common_prefix, prices_of, priced_cost
from ctxwise.tokens import COUNTER_NAMES
from ctxwise.tokens import Counter, get_counter, list_counters, register_counter

SRC = Path(ctxwise.__file__).resolve().parent


# -- one counter protocol, one registry ----------------------------------------------------------


def _word_counter(name: str) -> type[TokenCounter]:
    """A counter class called ``name`` that counts whitespace-separated words (a user's own)."""

    class Words(TokenCounter):
        unit = "tokens"

        def count_text(self, text: str) -> int:
            return len(text.split())

        def count_image(self, block: ImageBlock) -> int:
            return 100

    Words.name = name
    return Words


def _fresh(prefix: str = "words") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_every_counter_place_uses_the_one_protocol() -> None:
    """The stages, the fact book and the measures take the same ``Counter``; the built-ins follow it."""
    import ctxwise.compaction.context as context
    import ctxwise.memory.facts as facts
    import ctxwise.replay.metrics as metrics

    assert context.Counter is Counter and facts.Counter is Counter and metrics.Counter is Counter
    assert not hasattr(metrics, "MessageCounter")
    assert ctxwise.Counter is Counter
    for name in COUNTER_NAMES:
        assert isinstance(get_counter(name), Counter), name
    assert not isinstance(object(), Counter)


def test_list_counters_names_the_builtins_first_and_loads_no_tokenizer() -> None:
    probe = ("import sys, json\nfrom ctxwise.tokens import list_counters\n"
             "names = list_counters()\n"
             "print(json.dumps([names, [m for m in ('tiktoken', 'tokenizers') if m in sys.modules]]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    names, loaded = json.loads(out.stdout)
    assert names[: len(COUNTER_NAMES)] == list(COUNTER_NAMES)
    assert names[:6] == ["chars", "o200k_base", "cl100k_base", "deepseek", "qwen", "estimate"]
    assert loaded == []


def test_an_unknown_name_is_a_policy_error_listing_the_known_ones_with_a_hint() -> None:
    with pytest.raises(PolicyError) as err:
        get_counter("gpt2")
    for known in list_counters():
        assert known in str(err.value)
    assert "register_counter" in err.value.hint


def test_a_registered_counter_is_listed_shared_and_cannot_be_replaced() -> None:
    name = _fresh()
    cls = _word_counter(name)
    register_counter(name, cls)
    assert list_counters()[-1] == name
    counter = get_counter(name)
    assert isinstance(counter, cls) and get_counter(name) is counter
    assert counter.count_text("three small words") == 3
    with pytest.raises(PolicyError, match="already registered"):
        register_counter(name, _word_counter(name))
    with pytest.raises(PolicyError, match="already registered"):
        register_counter("o200k_base", _word_counter("o200k_base"))
    assert get_counter(name) is counter and list_counters().count(name) == 1


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_register_counter_refuses_a_blank_name(bad: Any) -> None:
    before = list_counters()
    with pytest.raises(PolicyError, match="non-empty"):
        register_counter(bad, _word_counter("x"))
    assert list_counters() == before


def test_register_counter_refuses_a_factory_that_is_not_callable() -> None:
    name = _fresh()
    with pytest.raises(PolicyError, match="callable"):
        register_counter(name, 42)  # type: ignore[arg-type]
    assert name not in list_counters()


def test_a_factory_whose_counter_has_another_name_fails_at_first_use_and_keeps_nothing() -> None:
    name = _fresh()
    register_counter(name, _word_counter("not-" + name))
    for _ in range(2):  # nothing was kept: the second call checks again
        with pytest.raises(PolicyError, match="called 'not-"):
            get_counter(name)
    other = _fresh()
    register_counter(other, lambda: object())  # type: ignore[arg-type, return-value]
    with pytest.raises(PolicyError, match="Counter protocol"):
        get_counter(other)


def test_a_registered_counter_works_as_a_policy_tokenizer(tmp_path: Path) -> None:
    """The session measures its context with the user's counter: sizes are its word counts."""
    name = _fresh()
    with pytest.raises(PolicyError, match="unknown tokenizer"):
        Policy(budget=4000, unit="tokens", tokenizer=name)
    register_counter(name, _word_counter(name))
    policy = Policy(budget=4000, unit="tokens", tokenizer=name)
    assert policy.counter_name == name
    msgs = [text_message("u1", "user", "please find order W2378156 and tell me its status"),
            text_message("a1", "assistant", "order W2378156 shipped on 2024-05-01"),
            text_message("u2", "user", "thanks, and the delivery address?")]
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}", policy) as cm:
        session = cm.session("user", "chat")
        session.append(msgs)
        prepared = session.prepare()
    words = get_counter(name)
    expected = sum(words.count_message(m) for m in prepared.messages) + words.frame.reply_priming
    assert prepared.unit == "tokens" and prepared.size == expected
    assert prepared.size == sum(len(m.text.split()) for m in msgs)  # the default frame adds nothing
    assert prepared.size != get_counter("o200k_base").count(prepared.messages)


def test_a_registered_counter_drives_compaction(tmp_path: Path) -> None:
    """A budget in the user's unit: a context over it in words is compacted, the same context
    under it is not."""
    name = _fresh()
    register_counter(name, _word_counter(name))
    body = " ".join(f"item{i}" for i in range(400))
    msgs = [text_message("u1", "user", "list the items"),
            Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="c1", name="list_items", input={})]),
            Message(id="t1", role="tool", blocks=[ToolResultBlock(tool_use_id="c1", name="list_items",
                                                                  output=[TextBlock(text=body)])]),
            text_message("a2", "assistant", "here they are"),
            text_message("u2", "user", "thanks, which is first?")]
    sizes = {}
    for budget in (2000, 300):
        policy = Policy.preset("default", budget=budget, unit="tokens", tokenizer=name, reserve_output=0)
        with ContextManager(f"sqlite:///{tmp_path / f'{budget}.db'}", policy) as cm:
            session = cm.session("user", "chat")
            session.append(msgs)
            prepared = session.prepare()
        sizes[budget] = (prepared.size_before, prepared.size, [e.stage for e in prepared.events])
    assert sizes[2000][0] == sizes[2000][1] and sizes[2000][2] == []
    before, after, stages = sizes[300]
    assert before == sizes[2000][0] > 300 >= after and "clearing" in stages


# -- one cost model ------------------------------------------------------------------------------


def _context() -> list[Message]:
    texts = ["You are a careful agent. " * 3, "book a flight to Lisbon for May 5",
             "searching flights " * 40, "flight TP1234 at 09:10, 320 EUR; flight TP1236 at 14:00 " * 12,
             "booked TP1234", "now a hotel near the airport please"]
    roles = ["system", "user", "assistant", "user", "assistant", "user"]
    return [text_message(f"m{i}", r, t) for i, (r, t) in enumerate(zip(roles, texts))]


def _edited(ctx: list[Message], at: int, keep_words: int) -> list[Message]:
    out = list(ctx)
    out[at] = text_message(ctx[at].id, ctx[at].role, " ".join(ctx[at].text.split()[:keep_words]))
    return out


MODELS = [FLAT, replace(ANTHROPIC, min_prefix=0), replace(OPENAI, min_prefix=0, increment=1),
          replace(DEEPSEEK, min_prefix=0), PriceModel("write-heavy", read=0.1, write=3.0)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_the_edit_rule_the_stages_use_is_what_the_measure_bills(model: PriceModel) -> None:
    """``PriceModel.edit_pays`` (the decision) says yes exactly when the measured cost of the
    calls that follow (``call_costs`` + ``priced_cost``, the replay's measure, same model, same
    prefix rule) is lower with the edit than without it."""
    counter = get_counter("o200k_base")
    ctx = _context()
    verdicts = set()
    for at, keep, calls in itertools.product((2, 3, 4), (0, 5, 60), (1, 2, 4, 8)):
        edited = _edited(ctx, at, keep)
        first = common_prefix(ctx, edited)
        if first == len(ctx):
            continue  # nothing changed
        assert first == at  # the prefix rule: everything before the first edited message is reused
        suffix = sum(counter.count_message(m) for m in ctx[first:])
        saved = suffix - sum(counter.count_message(m) for m in edited[first:])
        measured_keep = priced_cost(call_costs([ctx] * (calls + 1), counter), model)
        measured_edit = priced_cost(call_costs([ctx] + [edited] * calls, counter), model)
        decided = model.edit_pays(saved, suffix, calls)
        assert decided == (measured_edit < measured_keep), (at, keep, calls)
        verdicts.add(decided)
    assert verdicts == {True, False}  # both outcomes were put to the test


def test_the_stages_weigh_edits_with_the_policys_own_price_model() -> None:
    from ctxwise.compaction.cost import cache_prices

    for provider in ("openai", "anthropic", "deepseek", "qwen"):
        policy = Policy(provider=provider)
        assert prices_of(policy) == policy.prices
        assert cache_prices(policy) == (policy.prices.read, policy.prices.write)
    assert prices_of(None) is FLAT and prices_of(object()) is FLAT
    heavy = Policy(provider="anthropic", cache_write_price=10.0)
    assert prices_of(heavy).write == 10.0
    # 1.25 * 100 + 7 * 0.1 * 100 < 8 * 0.1 * 1000 < 10 * 100 + 7 * 0.1 * 100
    assert prices_of(Policy(provider="anthropic")).edit_pays(900, 1000, 8) and not prices_of(heavy).edit_pays(900, 1000, 8)


def test_call_costs_are_the_flat_model_priced_by_priced_cost() -> None:
    """The cache-adjusted cost and the FLAT model's price of the same calls are one figure."""
    counter = get_counter("o200k_base")
    ctx = _context()
    payloads = [ctx[:2], ctx[:4], ctx, _edited(ctx, 3, 5)]
    costs = call_costs(payloads, counter)
    assert [c.cost for c in costs] == [FLAT.call_cost(c.tokens, c.cached) for c in costs]
    assert sum(c.cost for c in costs) == priced_cost(costs, FLAT)
    assert costs[0].cached == 0 and costs[2].cached == counter.count(ctx[:4]) - counter.frame.reply_priming
    half = call_costs(payloads, counter, 0.5)
    assert [c.cost for c in half] == [c.cached * 0.5 + (c.tokens - c.cached) for c in half]
    with pytest.raises(ValueError, match="cache_ratio"):
        call_costs(payloads, counter, 1.5)


# -- one marker ----------------------------------------------------------------------------------


WRITERS = [
    ({"kind": "summary", "replaced": ["m1", "m2"], "rounds": 2, "summarizer": "digest"}, {}),
    ({"kind": "facts", "fact_ids": ["f1", "f2"]}, {}),
    ({"kind": "user_memory", "entry_ids": [3, 4]}, {}),
    ({"normalized": [{"rule": "data-block-left-out"}]}, {}),
    ({"cleared": ["c1", "c2"], "cleared_chars": 1200}, {"ctxwise": {"normalized": [{"rule": "x"}], "cleared": ["c0"]}}),
    ({"truncated": True}, {"other": 1, "ctxwise": {"beside": [{"type": "web_search_call"}]}}),
    ({"beside": [{"a": 1}]}, {"ctxwise": {"kind": "summary", "zzz": "kept"}, "after": True}),
]


@pytest.mark.parametrize(("fields", "metadata"), WRITERS)
def test_with_writes_the_same_json_as_the_hand_written_dict(fields: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Stored bytes unchanged: ``Marker.with_`` gives the JSON the hand-written merge gave
    (stored keys in their order, new ones after), and leaves its input alone."""
    m = Message(id="x", role="user", blocks=[TextBlock(text="hi")], metadata=json.loads(json.dumps(metadata)))
    by_hand = dict(m.metadata)
    by_hand["ctxwise"] = {**(m.metadata.get("ctxwise") or {}), **fields}
    got = Marker.with_(m, **fields)
    assert json.dumps(got) == json.dumps(by_hand)
    assert m.metadata == metadata  # the message's own metadata is untouched
    read = Marker.read(Message(id="y", role="user", metadata=got))
    for k, v in fields.items():
        assert getattr(read, k) == v


def test_read_is_typed_and_never_raises() -> None:
    plain = text_message("u", "user", "hi")
    assert Marker.read(plain) == Marker() and plain.kind is None and plain.beside == []
    summary = Message(id="s", role="user", metadata=Marker.with_({}, kind="summary", rounds=3))
    assert Marker.read(summary).kind == "summary" and Marker.read(summary).rounds == 3 and summary.kind == "summary"
    assert Marker.read(summary) is Marker.read(summary)  # kept in the message's memo
    odd = Message(id="o", role="user", metadata={"ctxwise": {"rounds": "3", "beside": [1], "interrupted": 1,
                                                             "kind": "mine", "future_key": {"a": 1}}})
    mark = Marker.read(odd)
    assert mark.rounds is None and mark.interrupted is None and mark.kind is None  # wrong types read as absent
    assert mark.beside == [1] and odd.beside == [1]
    assert Marker.stored(odd) == odd.metadata["ctxwise"]  # the stored dict, whole
    for raw in ("text", ["a"], 7, None):
        assert Marker.read(Message(id="r", role="user", metadata={"ctxwise": raw})) == Marker()


def test_with_refuses_unknown_fields_and_wrong_types_and_changes_nothing() -> None:
    m = Message(id="x", role="user", metadata={"ctxwise": {"kind": "summary"}})
    with pytest.raises(FormatError, match="Marker.with_: shortend_from is not a marker field") as err:
        Marker.with_(m, shortend_from=3)
    assert "Marker's own fields" in err.value.hint
    with pytest.raises(FormatError, match=r"field rounds: Input should be a valid integer \(got str\)"):
        Marker.with_(m, rounds="3")
    with pytest.raises(FormatError, match="field kind: "):
        Marker.with_(m, kind="notes")
    with pytest.raises(FormatError, match=r"field cleared\.1: "):
        Marker.with_(m, cleared=["c1", 2])
    assert m.metadata == {"ctxwise": {"kind": "summary"}}


def _marker_literals(path: Path) -> list[int]:
    """Lines of ``path`` that read or write the marker by hand: ``x["ctxwise"]``,
    ``{"ctxwise": ...}``, ``x.get("ctxwise")``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        key = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Dict):
            out += [node.lineno for k in node.keys if isinstance(k, ast.Constant) and k.value == "ctxwise"]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("get", "pop", "setdefault"):
            key = node.args[0]
        if isinstance(key, ast.Constant) and key.value == "ctxwise":
            out.append(node.lineno)
    return out


def test_only_the_marker_model_touches_metadata_ctxwise() -> None:
    """Every reader and writer of ``metadata["ctxwise"]`` goes through :class:`Marker`, except
    the engine and its core (being rewritten beside this change), policy.py (whose
    ``"ctxwise"`` is the TOML table of a policy file) and replay/run.py (a report's column).
    A message's metadata is never read or written by hand anywhere else."""
    allowed = {SRC / "messages.py", SRC / "engine.py", SRC / "policy.py", SRC / "replay" / "run.py"}
    bad = {}
    for path in sorted(SRC.rglob("*.py")):
        if path in allowed or "core" in path.relative_to(SRC).parts[:1]:
            continue
        lines = _marker_literals(path)
        if lines:
            bad[str(path.relative_to(SRC))] = lines
    assert bad == {}


def test_every_marker_key_a_real_session_writes_is_a_marker_field(tmp_path: Path) -> None:
    """A recorded tau2 conversation through a small budget (clearing, summaries, facts fire):
    every key ctxwise wrote into a message's marker, in the context and in the store, is a
    typed field of :class:`Marker` and reads back with its type."""
    from conftest import TRAJECTORIES
    from ctxwise.formats import load
    from ctxwise.units import is_user_input

    from ctxwise.errors import ContextBudgetExceeded

    policy = Policy.preset("default", budget=3000, unit="tokens")
    seen: set[str] = set()
    with ContextManager(f"sqlite:///{tmp_path / 'r.db'}", policy) as cm:
        for conv in load(TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json")[:6]:
            session = cm.session("u", conv.id)
            pending: list[Message] = []
            user_seen = False
            for m in conv.messages:
                user_seen = user_seen or is_user_input(m)
                if m.role == "assistant" and user_seen and pending:
                    session.append(pending)
                    pending = []
                    try:
                        sent = session.prepare().messages
                    except ContextBudgetExceeded:
                        continue
                    for s in sent:
                        seen |= set(Marker.stored(s))
                        assert Marker.read(s).model_extra == {}, s.id  # every key read with its type
                pending.append(m)
            for m in cm.session("u", conv.id).messages:
                seen |= set(Marker.stored(m))
    assert {"kind", "cleared"} <= seen
    assert seen <= set(Marker.model_fields)
