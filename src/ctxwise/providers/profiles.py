"""Provider profiles: the rules each target API enforces, stated as data.

A :class:`ProviderProfile` says *which* rules apply to a provider and *what the provider
answers* when one is broken; the checks themselves live in :mod:`ctxwise.providers.rules`
and :mod:`ctxwise.providers.reasoning`. Every rule cites its source:

* OpenAI Chat Completions — tool messages answer the ``tool_calls`` of the preceding
  assistant message: https://platform.openai.com/docs/guides/function-calling
  (error texts from the API's 400 answers quoted in ``cases/README.md``).
* DeepSeek thinking mode — ``reasoning_content`` of assistant messages in a user-to-user span
  that made tool calls must be passed back in every later request; other spans' reasoning is
  ignored: https://api-docs.deepseek.com/guides/thinking_mode (sections "Multi-turn
  Conversation" and "Tool Calls").
* Anthropic Messages — system is the top-level ``system`` parameter; ``tool_result`` blocks
  answer the ``tool_use`` blocks of the previous assistant message; thinking blocks are sent
  back unmodified and the last assistant message of a tool loop starts with one; blocks of
  earlier turns may be omitted:
  https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking ("Preserving
  thinking blocks"), https://docs.anthropic.com/en/docs/build-with-claude/tool-use.
* Qwen3 chat template (vLLM, llama.cpp, LM Studio) — raises "No user query found in
  messages." without a user query and "System message must be at the beginning." for a later
  system message; renders ``reasoning_content`` only after the last user query
  (vllm-project/vllm#36432, the ``chat_template.jinja`` of the Qwen3 model repositories).
* OpenAI Responses — a reasoning item travels with the item after it and a function call with
  its reasoning item: https://platform.openai.com/docs/guides/reasoning ("Keeping reasoning
  items in context"); error texts quoted in ``cases/README.md``.
* Gemini — a model turn with function calls comes right after a user turn or a function
  response turn: https://ai.google.dev/gemini-api/docs/function-calling.
* Reasoning bound to its prefix — Anthropic preserved thinking (Claude 5.x models; SDK
  ``anthropic`` 2.17 ``types/beta/beta_thinking_block_binding_param.py``,
  https://platform.claude.com/docs/en/build-with-claude/preserved-thinking and its
  ``prefix-checks`` page): a replayed thinking block is valid only while ``system``,
  ``tools`` and every earlier message are what they were when it was produced, else the
  request fails with a 400 (``prefix_mismatch_behavior: "error"``, the default) or the block
  is dropped (``"drop_block"``). OpenAI Responses ``reasoning.context="all_turns"`` (SDK
  ``openai`` 3.63 ``types/shared/reasoning.py``; guide
  https://developers.openai.com/api/docs/guides/keep-prefix-unchanged): reasoning items that
  follow a prefix change are dropped by the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal, Mapping

from ..errors import PolicyError

# -- rule slugs (stable: tests, events and the CLI print them) -----------------------------

ORPHAN_TOOL_RESULT = "orphan-tool-result"
UNANSWERED_TOOL_CALL = "unanswered-tool-call"
DUPLICATE_TOOL_RESULT = "duplicate-tool-result"
SYSTEM_NOT_FIRST = "system-not-first"
EMPTY_CONTENT = "empty-content"
BLANK_TEXT_BLOCK = "blank-text-block"
EMPTY_TOOL_RESULT = "empty-tool-result"
REASONING_MISSING = "reasoning-content-missing"
REASONING_CHANGED = "reasoning-content-changed"
THINKING_MODIFIED = "thinking-modified"
THINKING_REMOVED = "thinking-removed"
THINKING_NOT_FIRST = "thinking-not-first"
LATEST_ASSISTANT_THINKING = "latest-assistant-thinking"
NO_USER_MESSAGE = "no-user-message"
TOOL_CALL_ORDER = "tool-call-order"
REASONING_WITHOUT_FOLLOWING_ITEM = "reasoning-without-following-item"
REASONING_ITEM_MISSING = "reasoning-item-missing"
DUPLICATE_TOOL_CALL_ID = "duplicate-tool-call-id"
WIRE_SCHEMA = "wire-schema"
REASONING_PREFIX_CHANGED = "reasoning-prefix-changed"
PROVIDER_RESULT_WITHOUT_CALL = "provider-result-without-call"
FOREIGN_PROVIDER_BLOCK = "foreign-provider-block"
BLOCK_NOT_SENDABLE = "block-not-sendable"
CALL_ID_TOO_LONG = "call-id-too-long"
CALL_ID_CHARSET = "call-id-charset"
FIRST_MESSAGE_ROLE = "first-message-role"
IMAGE_NOT_SUPPORTED = "image-not-supported"
TOOL_MESSAGE_NAME = "tool-message-name"
THOUGHT_SIGNATURE_MISSING = "thought-signature-missing"
COMPACTION_MISPLACED = "compaction-misplaced"
DEVELOPER_AS_SYSTEM = "developer-as-system"
IMAGE_DETAIL_DROPPED = "image-detail-dropped"
THOUGHT_SIGNATURE_DROPPED = "thought-signature-dropped"
REASONING_SUMMARY_ADDED = "reasoning-summary-added"
CACHE_MARK_DROPPED = "cache-mark-dropped"

RULES: Mapping[str, str] = MappingProxyType(
    {
        ORPHAN_TOOL_RESULT: "a tool result without its call in the nearest earlier assistant "
        "message (only tool messages between)",
        UNANSWERED_TOOL_CALL: "a tool call not answered before the next non-tool message",
        DUPLICATE_TOOL_RESULT: "a second result for one tool call",
        SYSTEM_NOT_FIRST: "a rendered payload holds a system message after the leading ones on a "
        "provider that takes none there (ctxwise folds them into a user turn at render time; "
        "the canonical list may hold them anywhere)",
        EMPTY_CONTENT: "a message with no content (the final assistant message may be empty)",
        BLANK_TEXT_BLOCK: "an empty or whitespace-only text block",
        EMPTY_TOOL_RESULT: "a tool result with an empty or blank body (placeholders too)",
        REASONING_MISSING: "DeepSeek thinking mode: an assistant message of a tool-using "
        "user-to-user span without its reasoning_content",
        REASONING_CHANGED: "DeepSeek thinking mode: reasoning_content differs from the record",
        THINKING_MODIFIED: "Anthropic: a thinking block that is not byte-identical to a block "
        "of the same message in the record",
        THINKING_REMOVED: "Anthropic: a thinking block of the current turn was dropped",
        LATEST_ASSISTANT_THINKING: "Anthropic: the thinking / redacted_thinking blocks of the "
        "request's latest assistant message are not exactly those of the record (dropped, "
        "edited or reordered)",
        THINKING_NOT_FIRST: "Anthropic: the open tool turn's first assistant message does not start "
        "with a thinking block",
        NO_USER_MESSAGE: "Qwen3 template: no user message in the payload",
        TOOL_CALL_ORDER: "Gemini: a function-call turn not right after a user or "
        "function-response turn",
        REASONING_WITHOUT_FOLLOWING_ITEM: "OpenAI Responses: a reasoning item with no item "
        "after it in its assistant message",
        REASONING_ITEM_MISSING: "OpenAI Responses: a function call whose reasoning item was "
        "dropped",
        DUPLICATE_TOOL_CALL_ID: "a tool call id used twice in one rendered request (Anthropic: "
        "\"tool_use ids must be unique\")",
        WIRE_SCHEMA: "the rendered payload does not match the provider SDK's request type "
        "(an unknown key, a missing required key or a wrong type)",
        REASONING_PREFIX_CHANGED: "reasoning bound to its prefix (Anthropic preserved thinking, "
        "OpenAI Responses all_turns): a reasoning block sent after an earlier message changed "
        "since the request that produced it",
        PROVIDER_RESULT_WITHOUT_CALL: "a provider-run tool's result (Anthropic web_search_tool_result, "
        "mcp_tool_result, ...; Responses shell_call_output, ...) with no call of the same id before it",
        FOREIGN_PROVIDER_BLOCK: "a provider block (server tool, MCP, hosted call, compaction item) "
        "read from one provider family, sent to another",
        THOUGHT_SIGNATURE_DROPPED: "a Gemini thought signature given on an assistant message (not on a tool "
        "call) left out: the OpenAI-compatible endpoint takes one only on a tool call",
        CACHE_MARK_DROPPED: "Anthropic: a cache_control mark left out because the request would hold more "
        "than 4 (the system prompt's and the newest are kept; "
        "https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)",
        REASONING_SUMMARY_ADDED: "OpenAI Responses: a reasoning item given without its summary key sent with "
        "\"summary\": [] (openai/types/responses/response_reasoning_item_param.py: summary is Required)",
        IMAGE_DETAIL_DROPPED: "an image's detail (OpenAI low / high / auto / original) left out for a target "
        "whose image block has no detail (Anthropic)",
        DEVELOPER_AS_SYSTEM: "a message given with role developer (OpenAI) sent as a system message "
        "to a target whose API has no developer role",
        BLOCK_NOT_SENDABLE: "a block the target API has no form for (audio to Anthropic, a "
        "search_result to OpenAI, a Files-API image to Chat Completions, ...)",
        CALL_ID_TOO_LONG: "a tool call id longer than the provider takes (OpenAI: 40 characters)",
        CALL_ID_CHARSET: "a tool call id with characters the provider refuses (Anthropic: "
        "^[a-zA-Z0-9_-]+$)",
        FIRST_MESSAGE_ROLE: "Anthropic: the first message of the request is not a user message (unless "
        "it opens with the compaction block that stands for the history before it)",
        IMAGE_NOT_SUPPORTED: "an image sent to a provider that takes text only (DeepSeek, Qwen3 text models)",
        TOOL_MESSAGE_NAME: "Gemini: a tool message without the name of the function it answers",
        THOUGHT_SIGNATURE_MISSING: "Gemini 3: a function-call step of the current turn without its "
        "thought signature while another step of the turn carries one",
        COMPACTION_MISPLACED: "Anthropic: a compaction block that is not the first block of the "
        "conversation (the first block of the first message after the system prompt), that sits in a "
        "system message, or a second compaction block with content",
    }
)

ReasoningPassback = Literal["none", "tool_spans", "signed_blocks", "reasoning_items"]
WireShape = Literal["chat", "anthropic", "responses"]
PrefixMismatch = Literal["error", "dropped"]
MidSystem = Literal["as_is", "fold", "native"]
DroppableReasoning = Literal[
    "completed_turns", "completed_spans_without_tool_calls", "completed_turns_without_tool_calls"
]


@dataclass(frozen=True)
class ProviderProfile:
    """The rules one target API enforces on the message list of a request.

    Fields (all data, no behaviour):

    * ``tool_pairing`` — every call answered right after it, every result preceded by its call.
    * ``forbid_empty_content`` — no empty message or blank text block, except an optional
      final assistant message.
    * ``reasoning_passback`` — ``"none"`` (reasoning is never required back),
      ``"tool_spans"`` (DeepSeek: assistant messages of tool-using user-to-user spans carry
      their reasoning), ``"signed_blocks"`` (Anthropic: thinking blocks go back byte-identical),
      ``"reasoning_items"`` (OpenAI Responses: a reasoning item goes with the item after it,
      a function call with its reasoning item, ``encrypted_content`` unmodified).
    * ``first_message_user`` — the provider wants the first message after the system prompt to
      be a user message (Anthropic answers 'messages: first message must use the "user" role'):
      a hard trim never *creates* a window starting on an assistant message for it. Not a
      validator rule: recorded sessions that open with the agent's greeting are the caller's
      to render.
    * ``keep_latest_assistant_thinking`` — the latest assistant message of a request keeps its
      thinking and redacted_thinking blocks byte-identical, whichever turn it belongs to
      (Anthropic: "thinking or redacted_thinking blocks in the latest assistant message cannot
      be modified"); older completed turns may drop theirs whole.
    * ``thinking_first_in_open_tool_turn`` — with thinking on, the assistant message holding
      the open tool loop's latest ``tool_use`` starts with a thinking block.
    * ``sends_reasoning`` — whether earlier reasoning is part of the request at all (OpenAI
      Chat Completions and Gemini take no reasoning back: the payload carries none, so it
      costs nothing and is neither counted nor pruned).
    * ``needs_user_message`` — at least one user input must be present.
    * ``calls_follow_user_or_tool`` — an assistant message with tool calls directly follows a
      user or tool message.
    * ``droppable_reasoning`` — what compaction may drop: ``"completed_turns"`` (every thinking
      block before the latest user input), ``"completed_spans_without_tool_calls"`` (DeepSeek)
      or ``"completed_turns_without_tool_calls"`` (Responses: not beside a function call).
    * ``binds_reasoning`` — reasoning is bound to its prefix: a reasoning block is valid only
      while everything sent before it is what it was in the request that produced it
      (Anthropic preserved thinking, on for ``anthropic``; OpenAI Responses with
      ``reasoning.context="all_turns"``, off in the ``openai_responses`` profile itself; on
      when the policy says so or names a gpt-5.6 price model). ``Policy.bound_reasoning``
      switches it (:func:`bound_profile`).
    * ``prefix_mismatch`` — what the provider does with bound reasoning after a changed
      prefix: ``"error"`` (Anthropic: a 400 unless the request sets ``drop_block``) or
      ``"dropped"`` (OpenAI Responses: the API drops the reasoning items itself).
    * ``wire`` — the request shape the payload is rendered in (:mod:`ctxwise.providers.render`):
      ``"chat"`` (Chat Completions message list), ``"anthropic"`` (``{"system"?, "messages"}``)
      or ``"responses"`` (Responses API input items).
    * ``reasoning_field`` — for ``wire="chat"``: the assistant-message key that carries
      reasoning back (``"reasoning_content"``), or None when the provider takes none.
    * ``mid_system`` — what a system message after the leading ones becomes at render time
      (the canonical list, and so the transcript, keeps it as is; never a reason to refuse
      input): ``"as_is"`` (OpenAI Chat Completions and Responses take system / developer
      messages anywhere), ``"fold"`` (its text goes into the user turn at its place under
      :data:`MID_SYSTEM_HEADER`; leading system messages are merged into the system prompt) or
      ``"native"`` (Anthropic's ``role: "system"`` message among ``messages``, in the standard
      Messages API: SDK 2.17 ``types/message_param.py`` includes ``types/system_message_param.py``;
      taken by models with mid-conversation system messages only, so opt-in:
      ``Policy(provider="anthropic", native_system=True)``, see :data:`ANTHROPIC_NATIVE_SYSTEM`).
    * ``max_call_id_chars`` — the longest tool call id the provider takes (OpenAI: 40), or None.
    * ``call_id_pattern`` — a regular expression every tool call id must match in full
      (Anthropic: ``^[a-zA-Z0-9_-]+$``), or None. Ids outside these rules are renamed at render
      time (:func:`ctxwise.providers.render.call_id_renames`).
    * ``images`` — whether user messages may carry images; False (DeepSeek, Qwen3 text models) renders each image
      as a short text note (:data:`IMAGE_NOTE`).
    * ``tool_message_name`` — tool messages carry ``name``, the function they answer (Gemini's
      OpenAI-compatible endpoint).
    * ``thought_signatures`` — tool calls carry ``extra_content.google.thought_signature`` back
      as they were received (Gemini 3 on the OpenAI-compatible endpoint).
    * ``cache_breakpoints`` — ctxwise writes explicit prompt-cache breakpoints
      (``prompt_cache_breakpoint`` on content parts, OpenAI gpt-5.6 family, openai 3.63
      ``types/chat/chat_completion_content_part_text_param.py`` and
      ``types/responses/response_input_text_param.py``) at the end of the stable prefix and of
      the request (:mod:`ctxwise.providers.breakpoints`). Off in every profile of
      :data:`PROFILES`; ``Policy.profile`` turns it on for ``openai`` / ``openai_responses``
      under a price model with breakpoints (:func:`cache_breakpoint_profile`).
    * ``unsendable`` — block type (``"audio"``, ``"document"``, ...) → the source saying the
      target takes no such block: a message holding one is refused with ``block-not-sendable``
      naming its index (:func:`ctxwise.providers.rules.not_sendable`), on top of what the wire
      shape has no form for. Images are not listed here: ``images=False`` converts them.
    * ``errors`` — rule slug → the provider's own error text (``{index}`` is filled in).
    * ``sources`` — rule slug → where the rule is documented.
    """

    name: str
    title: str
    tool_pairing: bool = True
    forbid_empty_content: bool = True
    reasoning_passback: ReasoningPassback = "none"
    thinking_first_in_open_tool_turn: bool = False
    keep_latest_assistant_thinking: bool = False
    first_message_user: bool = False
    sends_reasoning: bool = True
    needs_user_message: bool = False
    calls_follow_user_or_tool: bool = False
    droppable_reasoning: DroppableReasoning = "completed_turns"
    binds_reasoning: bool = False
    prefix_mismatch: PrefixMismatch = "error"
    wire: WireShape = "chat"
    reasoning_field: str | None = None
    mid_system: MidSystem = "fold"
    max_call_id_chars: int | None = None
    call_id_pattern: str | None = None
    images: bool = True
    tool_message_name: bool = False
    thought_signatures: bool = False
    cache_breakpoints: bool = False
    unsendable: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    errors: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    sources: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    def error_text(self, rule: str, index: int) -> str | None:
        """The provider's error text for ``rule`` at message ``index``, or None if unknown."""
        text = self.errors.get(rule)
        return text.format(index=index) if text else None


_OPENAI_ERRORS = {
    ORPHAN_TOOL_RESULT: "messages with role 'tool' must be a response to a preceding message "
    "with 'tool_calls'",
    UNANSWERED_TOOL_CALL: "An assistant message with 'tool_calls' must be followed by tool "
    "messages responding to each 'tool_call_id'",
}
_OPENAI_DOC = "https://platform.openai.com/docs/guides/function-calling"
_DEEPSEEK_DOC = "https://api-docs.deepseek.com/guides/thinking_mode"
_ANTHROPIC_THINKING_DOC = "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking"
_ANTHROPIC_BINDING_DOC = ("https://platform.claude.com/docs/en/build-with-claude/preserved-thinking "
                          "(and /prefix-checks); SDK anthropic 2.17 beta_thinking_block_binding_param.py")
_ANTHROPIC_TOOLS_DOC = "https://docs.anthropic.com/en/docs/build-with-claude/tool-use"
_QWEN_DOC = "Qwen3 chat_template.jinja; vllm-project/vllm#36432"
_GEMINI_DOC = "https://ai.google.dev/gemini-api/docs/function-calling"
_CTXWISE = "ctxwise ARCHITECTURE.md decision 8 / cases README invariant 9 (stricter than the API)"
_OPENAI_CALL_ID = ("OpenAI refuses tool call ids over 40 characters (issue 25: \"Invalid 'messages[..].tool_calls"
                   "[..].id': string too long. Expected a string with maximum length 40\")")
_OPENAI_SYSTEM = ("https://platform.openai.com/docs/api-reference/chat/create (system / developer messages "
                  "are list items like any other); SDK openai 3.63 types/chat/chat_completion_message_param.py")
_ANTHROPIC_ID = ("https://docs.anthropic.com/en/api/messages (tool_use.id: \"^[a-zA-Z0-9_-]+$\"); "
                 "SDK anthropic 2.17 types/tool_use_block_param.py")
_ANTHROPIC_FIRST = 'https://docs.anthropic.com/en/api/messages ("first message must use the \"user\" role")'
_DEEPSEEK_IMAGES = "https://api-docs.deepseek.com/api/create-chat-completion (user content is a string)"
_GEMINI_COMPAT = "https://ai.google.dev/gemini-api/docs/openai"
_ANTHROPIC_COMPACTION = ("SDK anthropic 2.17 types/compaction_block_misplaced_error.py (\"The `compaction` block is "
                         "not the first block of the conversation, or is in a `system` message\"), "
                         "types/compaction_block_ambiguous_error.py (\"`messages` holds more than one `compaction` "
                         "block with content\"); https://platform.claude.com/docs/en/build-with-claude/"
                         "compaction-background (the returned message takes the place of the messages sent, "
                         "at the front of the history)")
_GEMINI_SIGNATURES = "https://ai.google.dev/gemini-api/docs/thought-signatures (OpenAI compatibility section)"
_DEEPSEEK_TEXT = ("https://api-docs.deepseek.com/api/create-chat-completion (user content: a string or text parts); "
                  "the API answers another part with \"Failed to deserialize the JSON body into the target type: "
                  "messages[N]: unknown variant `image_url`, expected `text`\" (Zoo-Code-Org/Zoo-Code#1106)")
_QWEN_TEXT = ("Qwen3 text models: the chat_template.jinja renders text content only, and vLLM serving Qwen/Qwen3-8B "
              "answers an image part with \"... is not a multimodal model\" (vllm-project/vllm#19144)")
_GEMINI_PARTS = ("https://ai.google.dev/gemini-api/docs/openai (user content parts documented: text, image_url "
                 "(\"Image understanding\"), input_audio (\"Audio understanding\"); no file part: a file_id names a "
                 "file of OpenAI's Files API)")

MID_SYSTEM_HEADER = "[System message]"
"""The header a folded mid-conversation system message's text goes under in the user turn
(``"[System message]\n<text>"``)."""
LEAD_USER_TEXT = "[Conversation start]"
"""The text of the minimal user turn rendered before a history that starts with an assistant
message, for a provider whose first message must be a user message (Anthropic)."""
IMAGE_NOTE = "[image not sent: this model takes text only]"
"""The text an image becomes for a provider that takes no images (DeepSeek, Qwen3 text models)."""

OPENAI = ProviderProfile(
    name="openai",
    title="OpenAI Chat Completions",
    sends_reasoning=False,
    mid_system="as_is",
    max_call_id_chars=40,
    errors=MappingProxyType({**_OPENAI_ERRORS, CALL_ID_TOO_LONG: "Invalid 'messages[{index}].tool_calls[0].id': "
                             "string too long. Expected a string with maximum length 40"}),
    sources=MappingProxyType(
        {
            ORPHAN_TOOL_RESULT: _OPENAI_DOC,
            UNANSWERED_TOOL_CALL: _OPENAI_DOC,
            SYSTEM_NOT_FIRST: _OPENAI_SYSTEM,
            CALL_ID_TOO_LONG: _OPENAI_CALL_ID,
            EMPTY_CONTENT: _CTXWISE,
        }
    ),
)

DEEPSEEK = ProviderProfile(
    name="deepseek",
    title="DeepSeek chat completions (thinking mode)",
    reasoning_passback="tool_spans",
    droppable_reasoning="completed_spans_without_tool_calls",
    reasoning_field="reasoning_content",
    images=False,
    unsendable=MappingProxyType({"audio": _DEEPSEEK_TEXT, "document": _DEEPSEEK_TEXT}),
    errors=MappingProxyType(
        {
            **_OPENAI_ERRORS,
            REASONING_MISSING: "The reasoning_content in the thinking mode must be passed back "
            "to the API / Missing reasoning_content field in the assistant message at message "
            "index {index}",
            REASONING_CHANGED: "The reasoning_content in the thinking mode must be passed back "
            "to the API",
        }
    ),
    sources=MappingProxyType(
        {
            ORPHAN_TOOL_RESULT: _OPENAI_DOC,
            UNANSWERED_TOOL_CALL: _OPENAI_DOC,
            REASONING_MISSING: _DEEPSEEK_DOC,
            REASONING_CHANGED: _DEEPSEEK_DOC,
            SYSTEM_NOT_FIRST: _CTXWISE + "; folded at render time",
            IMAGE_NOT_SUPPORTED: _DEEPSEEK_IMAGES,
            BLOCK_NOT_SENDABLE: _DEEPSEEK_TEXT,
            EMPTY_CONTENT: _CTXWISE,
        }
    ),
)

ANTHROPIC = ProviderProfile(
    name="anthropic",
    title="Anthropic Messages",
    reasoning_passback="signed_blocks",
    thinking_first_in_open_tool_turn=True,
    keep_latest_assistant_thinking=True,
    first_message_user=True,
    binds_reasoning=True,
    wire="anthropic",
    call_id_pattern=r"^[a-zA-Z0-9_-]+$",
    errors=MappingProxyType(
        {
            ORPHAN_TOOL_RESULT: "unexpected `tool_use_id` found in `tool_result` blocks. Each "
            "`tool_result` block must have a corresponding `tool_use` block in the previous "
            "message.",
            UNANSWERED_TOOL_CALL: "`tool_use` ids were found without `tool_result` blocks "
            "immediately after. Each `tool_use` block must have a corresponding `tool_result` "
            "block in the next message.",
            DUPLICATE_TOOL_RESULT: "each tool_use must have a single result. Found multiple "
            "`tool_result` blocks with the same id",
            SYSTEM_NOT_FIRST: 'Unexpected role "system". The Messages API accepts a top-level '
            '`system` parameter, not "system" as an input message role.',
            EMPTY_CONTENT: "all messages must have non-empty content except for the optional "
            "final assistant message",
            BLANK_TEXT_BLOCK: "text content blocks must contain non-whitespace text",
            EMPTY_TOOL_RESULT: "all messages must have non-empty content except for the "
            "optional final assistant message",
            THINKING_MODIFIED: "Invalid `signature` in `thinking` block",
            CALL_ID_CHARSET: "messages.{index}.content.0.tool_use.id: String should match pattern "
            "'^[a-zA-Z0-9_-]+$'",
            FIRST_MESSAGE_ROLE: 'messages: first message must use the "user" role',
            DUPLICATE_TOOL_CALL_ID: "messages.{index}: `tool_use` ids must be unique",
            LATEST_ASSISTANT_THINKING: "messages.{index}.content: `thinking` or "
            "`redacted_thinking` blocks in the latest assistant message cannot be modified. "
            "These blocks must remain as they were in the original response.",
            THINKING_NOT_FIRST: "Expected `thinking` or `redacted_thinking`, but found "
            "`tool_use`. When `thinking` is enabled, a final `assistant` message must start "
            "with a thinking block",
            COMPACTION_MISPLACED: "compaction_block_misplaced: The `compaction` block is not the first block "
            "of the conversation, or is in a `system` message.",
            REASONING_PREFIX_CHANGED: "messages.{index}.content.0: Invalid `signature` in "
            "`thinking` block. The block is bound to a different conversation. Remove the block, "
            "or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\".",
        }
    ),
    sources=MappingProxyType(
        {
            ORPHAN_TOOL_RESULT: _ANTHROPIC_TOOLS_DOC,
            UNANSWERED_TOOL_CALL: _ANTHROPIC_TOOLS_DOC,
            DUPLICATE_TOOL_RESULT: _ANTHROPIC_TOOLS_DOC,
            DUPLICATE_TOOL_CALL_ID: _ANTHROPIC_TOOLS_DOC,
            SYSTEM_NOT_FIRST: "https://docs.anthropic.com/en/api/messages (top-level system); the "
            "role \"system\" message (SDK 2.17 types/system_message_param.py, in MessageParam) only "
            "with Policy.native_system (ANTHROPIC_NATIVE_SYSTEM)",
            CALL_ID_CHARSET: _ANTHROPIC_ID,
            FIRST_MESSAGE_ROLE: _ANTHROPIC_FIRST,
            EMPTY_CONTENT: "https://docs.anthropic.com/en/api/messages",
            THINKING_MODIFIED: _ANTHROPIC_THINKING_DOC,
            THINKING_REMOVED: _ANTHROPIC_THINKING_DOC,
            THINKING_NOT_FIRST: _ANTHROPIC_THINKING_DOC,
            LATEST_ASSISTANT_THINKING: _ANTHROPIC_THINKING_DOC + " (\"Preserving thinking blocks\"; "
            "extended thinking with tool use)",
            REASONING_PREFIX_CHANGED: _ANTHROPIC_BINDING_DOC,
            COMPACTION_MISPLACED: _ANTHROPIC_COMPACTION,
        }
    ),
)

QWEN = ProviderProfile(
    name="qwen",
    title="Qwen3 chat template (vLLM / llama.cpp / LM Studio)",
    needs_user_message=True,
    reasoning_field="reasoning_content",
    images=False,
    unsendable=MappingProxyType({"audio": _QWEN_TEXT, "document": _QWEN_TEXT}),
    errors=MappingProxyType(
        {
            NO_USER_MESSAGE: "No user query found in messages.",
            SYSTEM_NOT_FIRST: "System message must be at the beginning.",
        }
    ),
    sources=MappingProxyType(
        {
            IMAGE_NOT_SUPPORTED: _QWEN_TEXT,
            BLOCK_NOT_SENDABLE: _QWEN_TEXT,
            NO_USER_MESSAGE: _QWEN_DOC,
            SYSTEM_NOT_FIRST: _QWEN_DOC + "; folded at render time",
            ORPHAN_TOOL_RESULT: _OPENAI_DOC + " (vLLM serves the OpenAI chat API)",
            EMPTY_CONTENT: _CTXWISE,
        }
    ),
)

GEMINI = ProviderProfile(
    name="gemini",
    title="Google Gemini (generateContent / OpenAI-compatible)",
    sends_reasoning=False,
    calls_follow_user_or_tool=True,
    tool_message_name=True,
    thought_signatures=True,
    unsendable=MappingProxyType({"document": _GEMINI_PARTS}),
    errors=MappingProxyType(
        {
            TOOL_CALL_ORDER: "Please ensure that function call turn comes immediately after a "
            "user turn or after a function response turn.",
            THOUGHT_SIGNATURE_MISSING: "Function call is missing a thought_signature in functionCall "
            "parts. This is required for tools to work correctly",
        }
    ),
    sources=MappingProxyType(
        {
            TOOL_CALL_ORDER: _GEMINI_DOC,
            ORPHAN_TOOL_RESULT: _GEMINI_DOC,
            SYSTEM_NOT_FIRST: "https://ai.google.dev/gemini-api/docs/text-generation "
            "(system_instruction); folded at render time",
            TOOL_MESSAGE_NAME: _GEMINI_COMPAT,
            THOUGHT_SIGNATURE_MISSING: _GEMINI_SIGNATURES,
            BLOCK_NOT_SENDABLE: _GEMINI_PARTS,
            EMPTY_CONTENT: _CTXWISE,
        }
    ),
)

_RESPONSES_DOC = "https://platform.openai.com/docs/guides/reasoning"

OPENAI_RESPONSES = ProviderProfile(
    name="openai_responses",
    title="OpenAI Responses API (input items)",
    reasoning_passback="reasoning_items",
    droppable_reasoning="completed_turns_without_tool_calls",
    prefix_mismatch="dropped",
    wire="responses",
    mid_system="as_is",
    max_call_id_chars=40,
    errors=MappingProxyType(
        {
            ORPHAN_TOOL_RESULT: "No tool call found for function call output with call_id",
            REASONING_WITHOUT_FOLLOWING_ITEM: "Item of type 'reasoning' was provided without "
            "its required following item",
            REASONING_ITEM_MISSING: "Item of type 'function_call' was provided without its "
            "required 'reasoning' item",
        }
    ),
    sources=MappingProxyType(
        {
            ORPHAN_TOOL_RESULT: _OPENAI_DOC,
            UNANSWERED_TOOL_CALL: _OPENAI_DOC,
            REASONING_WITHOUT_FOLLOWING_ITEM: _RESPONSES_DOC,
            REASONING_ITEM_MISSING: _RESPONSES_DOC,
            THINKING_MODIFIED: _RESPONSES_DOC,
            REASONING_PREFIX_CHANGED: "https://developers.openai.com/api/docs/guides/keep-prefix-unchanged; "
            "SDK openai 3.63 types/shared/reasoning.py (reasoning.context)",
            SYSTEM_NOT_FIRST: "SDK openai 3.63 types/responses/easy_input_message_param.py (role "
            "system / developer on any input item)",
            CALL_ID_TOO_LONG: _OPENAI_CALL_ID,
            EMPTY_CONTENT: _CTXWISE,
        }
    ),
)

ANTHROPIC_NATIVE_SYSTEM = replace(ANTHROPIC, mid_system="native")
"""The Anthropic profile with mid-conversation system messages sent in the native form
(``{"role": "system", "content"}`` among ``messages``): the standard ``client.messages`` takes
it (SDK 2.17 ``types/message_param.py``: ``MessageParam`` includes ``SystemMessageParam``; no
beta header), on models that accept mid-conversation system messages (Claude Opus 4.8 and
later, https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-8). A
session gets it with ``Policy(provider="anthropic", native_system=True)`` (``Policy.profile``);
the functions that take a profile (``convert``, ``render``, ``check``) take it as is. Not in
:data:`PROFILES`."""

PROFILES: Mapping[str, ProviderProfile] = MappingProxyType(
    {p.name: p for p in (OPENAI, OPENAI_RESPONSES, DEEPSEEK, ANTHROPIC, QWEN, GEMINI)}
)


def get_profile(provider: str | ProviderProfile) -> ProviderProfile:
    """The profile named ``provider`` (case-insensitive); a profile is returned as is.

    Raises :class:`~ctxwise.errors.PolicyError` for an unknown name, listing the known ones.
    """
    if isinstance(provider, ProviderProfile):
        return provider
    profile = PROFILES.get(str(provider).strip().lower())
    if profile is None:
        known = ", ".join(sorted(PROFILES))
        raise PolicyError(f"unknown provider {provider!r}; known providers: {known}")
    return profile


BoundReasoningSetting = Literal["auto", "on", "off"]

ALL_TURNS_PRICE_MODELS = ("openai_gpt56", "openai_gpt56_12h")
"""``Policy.price_model`` names that say the model is of the gpt-5.6 family, whose Responses
``reasoning.context`` defaults to ``all_turns`` ("The gpt-5.6 model family defaults to
all_turns; earlier models default to current_turn", ``openai/types/shared/reasoning.py``):
with one of them ``bound_reasoning="auto"`` binds on ``openai_responses``."""


def bound_profile(provider: str | ProviderProfile, setting: str = "auto",
                  all_turns: bool = False) -> ProviderProfile:
    """The profile of ``provider`` with ``binds_reasoning`` as ``setting`` says
    (``Policy.bound_reasoning``): ``"auto"`` keeps the profile's own (on for ``anthropic``,
    Claude 5.x preserved thinking; for ``openai_responses`` on exactly when ``all_turns`` is
    True, i.e. the model is known to be of the gpt-5.6 family, whose ``reasoning.context``
    defaults to ``all_turns``: :data:`ALL_TURNS_PRICE_MODELS`; earlier models default to
    ``current_turn``, which renders no earlier turn's reasoning back), ``"on"`` / ``"off"``
    force it (``"off"`` for older Claude models, ``"on"`` for Responses with ``all_turns``). A
    provider whose payload carries no reasoning back (``sends_reasoning`` False) or that takes
    it back in chat-style spans (``tool_spans``) never binds. Raises
    :class:`~ctxwise.errors.PolicyError` for an unknown provider or setting."""
    profile = get_profile(provider)
    if setting not in ("auto", "on", "off"):
        raise PolicyError(f"unknown bound_reasoning {setting!r}; known: auto, on, off")
    can_bind = profile.sends_reasoning and profile.reasoning_passback in ("signed_blocks", "reasoning_items")
    auto = profile.binds_reasoning or (all_turns and profile.reasoning_passback == "reasoning_items")
    want = auto if setting == "auto" else setting == "on"
    binds = want and can_bind
    return profile if binds == profile.binds_reasoning else replace(profile, binds_reasoning=binds)


BREAKPOINT_TARGETS = ("openai", "openai_responses")
"""Profiles whose wire takes explicit prompt-cache breakpoints (OpenAI Chat Completions and
Responses: ``prompt_cache_breakpoint`` on content parts, gpt-5.6 and later, openai 3.63
``types/chat/completion_create_params.py`` / ``types/responses/response_create_params.py``
``PromptCacheOptions``)."""


def cache_breakpoint_profile(profile: ProviderProfile, breakpoints: int) -> ProviderProfile:
    """``profile`` with ``cache_breakpoints`` on when it is one of :data:`BREAKPOINT_TARGETS`
    and the price model in force writes explicit breakpoints (``PriceModel.breakpoints`` > 0:
    ``openai_gpt56``, ``openai_gpt56_12h``); ``profile`` as it is otherwise."""
    want = breakpoints > 0 and profile.name in BREAKPOINT_TARGETS
    return profile if want == profile.cache_breakpoints else replace(profile, cache_breakpoints=want)
