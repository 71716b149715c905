"""Token counters with the real tokenizers (no mocks): texts, framing, cache, registry, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxwise.errors import PolicyError
from ctxwise.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text_message,
)
from ctxwise.tokens import COUNTER_NAMES, TiktokenCounter, TokenCounter, get_counter
from ctxwise.tokens.base import ChatFrame

TOKEN_COUNTERS = [n for n in COUNTER_NAMES if n != "chars"]

SAMPLES = [
    "hello world",
    "tiktoken is great!",
    "Your order #W2378156 totals $1,234.56 and ships on 2024-05-01.",
    '{"order_id": "#W5166363", "items": [{"name": "Laptop", "price": 2322.4}]}',
    "请帮我整理上个季度华东区的销售数据，按城市分组。",
    "Съешь же ещё этих мягких французских булок 🥐\n\n\tdone",
    "<|endoftext|> is a special token string but counted as text",
    "",
]


def _agent_turn() -> list[Message]:
    return [
        text_message("s", "system", "You are a support agent."),
        text_message("u1", "user", "Where is my order #W123?"),
        Message(
            id="a1",
            role="assistant",
            blocks=[
                ThinkingBlock(thinking="Look the order up first."),
                TextBlock(text="Let me check."),
                ToolUseBlock(id="c1", name="get_order_details", input={"order_id": "#W123", "note": "é"}),
            ],
        ),
        Message(
            id="t1",
            role="tool",
            blocks=[ToolResultBlock(tool_use_id="c1", name="get_order_details", output=[TextBlock(text='{"status": "shipped"}')])],
        ),
    ]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("text", SAMPLES)
def test_tiktoken_counts_equal_tiktoken_encode(name: str, text: str) -> None:
    counter = get_counter(name)
    assert isinstance(counter, TiktokenCounter)
    assert counter.count_text(text) == len(counter.encoding.encode(text, disallowed_special=()))


def test_known_token_counts() -> None:
    o200k, cl100k = get_counter("o200k_base"), get_counter("cl100k_base")
    assert o200k.count_text("hello world") == 2
    assert cl100k.count_text("hello world") == 2
    # OpenAI cookbook: "tiktoken is great!" is 6 cl100k tokens: t|ik|token| is| great|!
    assert cl100k.encoding.decode_tokens_bytes(cl100k.encoding.encode("tiktoken is great!")) == [
        b"t", b"ik", b"token", b" is", b" great", b"!"
    ]
    assert cl100k.count_text("tiktoken is great!") == 6
    # the vocabularies have OpenAI's sizes (special tokens included)
    assert o200k.encoding.n_vocab == 200019 and cl100k.encoding.n_vocab == 100277


def test_openai_framing_matches_cookbook_formula() -> None:
    """count() equals the cookbook's num_tokens_from_messages on plain and named messages."""
    counter = get_counter("o200k_base")
    enc = counter.encoding
    chat = [
        {"role": "system", "content": "You are a helpful assistant that translates jargon."},
        {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
        {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
        {"role": "user", "content": "This late pivot means we don't have time to boil the ocean."},
    ]
    cookbook = 3  # every reply is primed with <|start|>assistant<|message|>
    for m in chat:
        cookbook += 3
        for key, value in m.items():
            cookbook += len(enc.encode(value))
            if key == "name":
                cookbook += 1
    msgs = [
        Message(id=f"m{i}", role=m["role"], name=m.get("name"), blocks=[TextBlock(text=m["content"])])
        for i, m in enumerate(chat)
    ]
    assert counter.count(msgs) == cookbook


def test_tool_call_counted_as_name_plus_arguments_plus_overhead() -> None:
    counter = get_counter("o200k_base")
    use = ToolUseBlock(id="c1", name="get_order_details", input={"order_id": "#W123"})
    m = Message(id="a", role="assistant", blocks=[use])
    expected = 3 + counter.count_text("assistant") + counter.frame.per_tool_call
    expected += counter.count_text("get_order_details") + counter.count_text('{"order_id": "#W123"}')
    assert counter.count_message(m) == expected


def test_chars_is_ragents_rule() -> None:
    chars = get_counter("chars")
    assert chars.unit == "chars"
    msgs = _agent_turn()
    expected = (
        len("You are a support agent.")
        + len("Where is my order #W123?")
        + len("Look the order up first.")
        + len("Let me check.")
        + len("get_order_details")
        + len(json.dumps({"order_id": "#W123", "note": "é"}, ensure_ascii=False))
        + len('{"status": "shipped"}')
    )
    assert chars.count(msgs) == expected
    assert chars.count_tools([{"name": "f"}]) == len('{"name": "f"}')


@pytest.mark.parametrize("name", TOKEN_COUNTERS)
def test_every_counter_counts_every_block(name: str) -> None:
    counter = get_counter(name)
    assert counter.unit == "tokens"
    assert counter.rules.strip()
    msgs = _agent_turn()
    sizes = [counter.count_message(m) for m in msgs]
    assert all(s > 0 for s in sizes)
    assert counter.count(msgs) == sum(sizes) + counter.frame.reply_priming
    assert counter.count([]) == 0
    # each block adds to the message
    bare = Message(id="x", role="assistant", blocks=[TextBlock(text="Let me check.")])
    more = Message(id="y", role="assistant", blocks=[*bare.blocks, ThinkingBlock(thinking="hmm, think")])
    assert counter.count_message(more) > counter.count_message(bare)


@pytest.mark.parametrize("name", COUNTER_NAMES)
def test_count_tools(name: str) -> None:
    counter = get_counter(name)
    schema = {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "Get the status and details of an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
    assert counter.count_tools([]) == 0
    assert counter.count_tools(None) == 0
    one = counter.count_tools([schema])
    assert one >= counter.count_text(json.dumps(schema))
    assert counter.count_tools([schema, schema]) > one


def test_get_counter_is_shared_and_rejects_unknown_names() -> None:
    assert get_counter("o200k_base") is get_counter("o200k_base")
    assert set(COUNTER_NAMES) == {"chars", "o200k_base", "cl100k_base", "deepseek", "qwen", "estimate"}
    with pytest.raises(PolicyError) as err:
        get_counter("gpt2")
    for known in COUNTER_NAMES:
        assert known in str(err.value)


class _CountingCounter(TokenCounter):
    """o200k text counting that records how often the tokenizer runs."""

    name = "test-counting-o200k"
    unit = "tokens"
    frame = ChatFrame(per_message=3, role_counted=True, reply_priming=3)

    def __init__(self) -> None:
        self.encoding = get_counter("o200k_base").encoding  # type: ignore[attr-defined]
        self.calls = 0

    def count_text(self, text: str) -> int:
        self.calls += 1
        return len(self.encoding.encode_ordinary(text))

    def count_image(self, block: ImageBlock) -> int:
        return 85


def test_message_counted_once_per_object() -> None:
    counter = _CountingCounter()
    msgs = _agent_turn()
    first = counter.count(msgs)
    calls = counter.calls
    assert calls > 0
    assert counter.count(msgs) == first
    assert counter.count_message(msgs[2]) == counter.count_message(msgs[2])
    assert counter.calls == calls  # nothing was encoded again
    # an edited copy starts with an empty memo and is counted afresh
    edited = msgs[1].model_copy(update={"blocks": [TextBlock(text="Where is order #W999?")]})
    counter.count_message(edited)
    assert counter.calls > calls
    # the memo is per counter: another counter does not reuse this one's number
    assert counter.memo_key in msgs[1].memo()
    assert get_counter("o200k_base").memo_key != counter.memo_key


def test_counters_do_not_share_memo_entries() -> None:
    m = text_message("u", "user", "请帮我整理上个季度华东区的销售数据")
    sizes = {n: get_counter(n).count_message(m) for n in COUNTER_NAMES}
    assert sizes["chars"] == len("请帮我整理上个季度华东区的销售数据")
    assert {get_counter(n).memo_key for n in COUNTER_NAMES} <= set(m.memo())


def test_deepseek_and_qwen_give_plausible_counts() -> None:
    ds, qw = get_counter("deepseek"), get_counter("qwen")
    english = "The quick brown fox jumps over the lazy dog."
    chinese = "请帮我整理上个季度华东区的销售数据，按城市分组，并列出每个城市的同比增长率。" * 4
    for c in (ds, qw):
        assert c.count_text("hello world") == 2
        assert 8 <= c.count_text(english) <= 12
        per_char = c.count_text(chinese) / len(chinese)
        assert 0.4 <= per_char <= 1.0, (c.name, per_char)
    assert qw.count_text("12345") == 5  # Qwen splits digits one by one
    assert ds.count_text("12345") == 2  # DeepSeek takes up to three digits a token
    # DeepSeek: no BOS added to a text count
    assert ds.count_text("hi") == len(ds.tokenizer.encode("hi", add_special_tokens=False).ids)


def test_estimate_tracks_o200k_on_english_and_json() -> None:
    est, o200k = get_counter("estimate"), get_counter("o200k_base")
    prose = (
        "I'd be happy to help you with that! To get started, I need to verify your identity. "
        "Could you please provide the email address associated with your account?"
    )
    js = '{"order_id": "#W5166363", "status": "pending", "items": [{"item_id": "8997785118", "price": 2322.4}]}'
    for text in (prose, js):
        ratio = est.count_text(text) / o200k.count_text(text)
        assert 0.8 <= ratio <= 1.4, (text, ratio)


def test_tiktoken_counters_work_offline(tmp_path: Path) -> None:
    """With an empty TIKTOKEN_CACHE_DIR and every socket refused, all counters still count."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    script = textwrap.dedent(
        """
        import socket
        def refuse(*a, **k):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from ctxwise.tokens import COUNTER_NAMES, get_counter
        from ctxwise.messages import text_message
        m = text_message("u", "user", "hello world 你好")
        for name in COUNTER_NAMES:
            c = get_counter(name)
            assert c.count_text("hello world") > 0, name
            assert c.count([m]) > 0, name
        print(get_counter("o200k_base").count_text("hello world"))
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "DATA_GYM_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
    assert list(cache.iterdir()) == []  # nothing was fetched or cached
