"""Kind of fault: counting a huge tool result encoded it whole (a 20 MB result held ~1 GB of
token ids). Text over CHUNK_CHARS is counted in pieces cut where every BPE split pattern
starts a new pre-token, so the count is the same; bench/robustness.py measures the memory."""

from __future__ import annotations

import random
import string

import pytest

from ctxwise.tokens import get_counter
from ctxwise.tokens.base import CHUNK_CHARS, text_chunks


def _text(n: int) -> str:
    rnd = random.Random(7)
    words = ["".join(rnd.choices(string.ascii_letters + "éß中文", k=rnd.randint(1, 9))) for _ in range(800)]
    parts = []
    while sum(map(len, parts)) < n:
        parts.append(rnd.choice(words) + rnd.choice([" ", " ", " ", "\n", ", ", "  ", " 42 ", ".\n\n"]))
    return "".join(parts)[:n]


def test_chunks_are_bounded_and_lossless():
    text = _text(5 * CHUNK_CHARS + 123)
    pieces = list(text_chunks(text))
    assert len(pieces) >= 5
    assert all(len(p) <= CHUNK_CHARS for p in pieces)
    assert "".join(pieces) == text


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "qwen", "deepseek"])
def test_chunked_count_equals_the_whole_count(name):
    c = get_counter(name)
    text = _text(3 * CHUNK_CHARS + 777)
    assert len(list(text_chunks(text))) > 1
    if name in ("o200k_base", "cl100k_base"):  # the encoder on the whole text, as before
        whole = len(c.encoding.encode_ordinary(text))
    elif name == "qwen":
        import unicodedata

        whole = len(c.encoding.encode_ordinary(unicodedata.normalize("NFC", text)))
    else:
        whole = len(c.tokenizer.encode(text, add_special_tokens=False).ids)
    assert c.count_text(text) == whole


def test_a_run_without_spaces_is_within_a_token_per_cut():
    c = get_counter("o200k_base")
    text = "".join(random.Random(3).choices(string.ascii_letters + string.digits + "+/", k=3 * CHUNK_CHARS + 5))
    cuts = len(list(text_chunks(text))) - 1
    assert cuts == 3
    assert abs(c.count_text(text) - len(c.encoding.encode_ordinary(text))) <= cuts
