"""The canonical message model: one shape for everything inside ctxwise.

A :class:`Message` is ``{id, role, name?, blocks[], metadata}``. Blocks are small typed
classes told apart by their ``type`` field (the pydantic-ai style of message parts):

* :class:`TextBlock` ``{"type": "text", "text"}``
* :class:`ThinkingBlock` ``{"type": "thinking", "thinking", "signature"?, "redacted"}``: model
  reasoning. Anthropic ``thinking`` / ``redacted_thinking`` blocks (with their opaque
  signature) and DeepSeek / OpenAI-compatible ``reasoning_content`` both land here.
* :class:`ToolUseBlock` ``{"type": "tool_use", "id", "name", "input"}``: one tool call.
* :class:`ToolResultBlock` ``{"type": "tool_result", "tool_use_id", "name"?, "state", "output"}``:
  the answer to one tool call; ``output`` is a list of text and image blocks.
* :class:`ImageBlock` ``{"type": "image", "media_type"?, "data"? | "url"? | "file_id"?, "byte_size"?, "width"?, "height"?, "detail"?}``.
* :class:`DocumentBlock`, :class:`SearchResultBlock`, :class:`AudioBlock`, :class:`RefusalBlock`:
  documents, search results, audio input and refusals.
* :class:`ProviderBlock` ``{"type": "provider", "provider", "kind", "raw", "call_id"?}``: a
  provider-specific block (server tools, MCP, hosted tool calls, encrypted reasoning) kept verbatim.

Roles are ``system``, ``user``, ``assistant`` and ``tool``. A ``tool`` message carries the
``tool_result`` blocks answering the ``tool_use`` blocks of the assistant message before it
(Anthropic sends these inside a user message; the Anthropic adapter maps them).

Models are frozen: a stage that edits a message builds a new one with ``model_copy``. That is
what lets the token counters cache a count per message safely.

Format-specific fields that have no canonical home (timestamps, usage, raw provider
responses, ...) are kept in ``Message.metadata`` and ``extra`` dicts on blocks so that the
adapters in :mod:`ctxwise.formats` can round-trip them losslessly.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from .errors import FormatError

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")

JSONValue: TypeAlias = Union[dict[str, "JSONValue"], list["JSONValue"], str, int, float, bool, None]
"""A JSON value as :func:`json.loads` returns it (an object is a dict with string keys)."""
JSONObject: TypeAlias = dict[str, JSONValue]
"""A JSON object: a tool schema, a stored compaction event."""


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    extra: dict[str, Any] = Field(default_factory=dict)
    """Format-specific fields of the block that have no canonical home (kept for round trips)."""

    _OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the dump while ``None``, so blocks that do not use them keep the
    canonical JSON (and so the digest) they had before the field existed."""

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self._OMIT_WHEN_NONE:
            if data.get(name, 0) is None:
                del data[name]
        return data


class TextBlock(_Block):
    """Plain text. ``text`` is counted in characters by the ``chars`` counter.

    ``citations`` are the provider's citation objects kept verbatim (Anthropic
    ``TextBlockParam.citations``, ``anthropic/types/text_block_param.py``; Responses
    ``output_text.annotations``), ``None`` when the block has none.
    """

    type: Literal["text"] = "text"
    text: str
    citations: list[dict[str, Any]] | None = None

    _OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = ("citations",)


class ImageBlock(_Block):
    """An image, inline (base64 ``data``) or by ``url``.

    Counters size images by an image rule (pixels or a flat default), never by the length of
    ``data``. ``byte_size`` is the decoded size in bytes when known.
    """

    type: Literal["image"] = "image"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    byte_size: int | None = None
    width: int | None = None
    height: int | None = None
    file_id: str | None = None
    """A Files-API id (Anthropic ``source.type == "file"``, Responses ``input_image.file_id``)."""
    detail: Literal["low", "high", "auto", "original"] | None = None
    """OpenAI ``detail`` (``openai/types/responses/response_input_image_param.py``)."""

    _OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = ("file_id", "detail")


class ThinkingBlock(_Block):
    """Model reasoning.

    ``redacted=True`` is Anthropic's ``redacted_thinking`` (``thinking`` then holds the opaque
    ``data``). ``signature`` is Anthropic's opaque signature; a thinking block must be sent
    back byte-identical or the API rejects it ("Invalid signature in thinking block"), so no
    stage ever edits one: it is kept whole or dropped whole.
    """

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    redacted: bool = False

    def opaque(self) -> str | None:
        """The opaque payload this block carries and is sent with it, or None: Anthropic
        ``redacted_thinking``'s ``data`` (``thinking`` when ``redacted``), else a Responses
        ``reasoning`` item's ``encrypted_content`` (kept by :mod:`ctxwise.formats.responses`
        under ``extra["_responses"]["item"]``, or a top-level ``extra["encrypted_content"]``;
        ``openai/types/responses/response_reasoning_item_param.py``)."""
        if self.redacted:
            return self.thinking
        note = (self.extra.get("_responses") or {}).get("item")
        enc = note.get("encrypted_content") if isinstance(note, dict) and "encrypted_content" in note \
            else self.extra.get("encrypted_content")
        return enc if isinstance(enc, str) and enc else None


class ToolUseBlock(_Block):
    """One tool call: ``id`` pairs it with the :class:`ToolResultBlock` that answers it."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class DocumentBlock(_Block):
    """A document (PDF or plain text) the model reads.

    ``source_type`` is ``base64`` (``data`` + ``media_type``), ``text`` (``data`` is the text),
    ``url`` (``url``), ``file`` (``file_id``) or ``content`` (``content`` holds text/image
    blocks). ``title`` and ``context`` are Anthropic's optional fields; ``citations`` is the
    citations config (``{"enabled": bool}``) kept verbatim. Source:
    ``anthropic/types/document_block_param.py``; Responses ``input_file``
    (``openai/types/responses/response_input_file_param.py``: ``file_data``/``file_id``/``file_url``).
    """

    type: Literal["document"] = "document"
    source_type: Literal["base64", "text", "url", "file", "content"]
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    filename: str | None = None
    content: list[Union[TextBlock, ImageBlock]] | None = None
    title: str | None = None
    context: str | None = None
    citations: dict[str, Any] | None = None


class SearchResultBlock(_Block):
    """A search result the application supplies, citable by the model.

    ``content`` is its text blocks; ``citations`` is the citations config kept verbatim.
    Source: ``anthropic/types/search_result_block_param.py`` (Anthropic only).
    """

    type: Literal["search_result"] = "search_result"
    source: str
    title: str
    content: list[TextBlock] = Field(default_factory=list)
    citations: dict[str, Any] | None = None


class AudioBlock(_Block):
    """Audio input: base64 ``data`` in ``format`` (``wav`` or ``mp3``).

    Source: Chat Completions ``input_audio`` content part
    (``openai/types/chat/chat_completion_content_part_input_audio_param.py``).
    """

    type: Literal["audio"] = "audio"
    data: str
    format: str


class RefusalBlock(_Block):
    """A model refusal (``text`` is the refusal message).

    Source: Chat Completions ``refusal`` content part
    (``openai/types/chat/chat_completion_content_part_refusal_param.py``) and Responses
    ``refusal`` output content (``openai/types/responses/response_output_refusal_param.py``).
    """

    type: Literal["refusal"] = "refusal"
    text: str


ProviderFamily = Literal["anthropic", "openai_responses", "openai_chat", "gemini"]


class ProviderBlock(_Block):
    """A provider-specific block or item with no canonical shape, kept verbatim.

    ``provider`` is the family that produced it, ``kind`` its wire ``type`` (Anthropic
    ``server_tool_use``, ``web_search_tool_result``, ``web_fetch_tool_result``,
    ``code_execution_tool_result``, ``bash_code_execution_tool_result``,
    ``text_editor_code_execution_tool_result``, ``mcp_tool_use``, ``mcp_tool_result``,
    ``container_upload``; Responses ``compaction``, ``reasoning`` with ``encrypted_content``,
    ``web_search_call``, ``file_search_call``, ``code_interpreter_call``, ``mcp_call``,
    ``local_shell_call(_output)``, ``shell_call(_output)``, ``apply_patch_call(_output)``, ...),
    ``raw`` the whole wire JSON object exactly as read; it is sent back byte-for-byte.
    ``call_id`` is the id pairing a call with its result (a server tool use's ``id`` / a
    result's ``tool_use_id``; a Responses ``call_id``), ``None`` when the block has none.
    No stage edits or clears one: where a provider's rules on clearing server-tool results
    are not documented, ctxwise never clears them.
    """

    type: Literal["provider"] = "provider"
    provider: ProviderFamily
    kind: str
    raw: dict[str, Any]
    call_id: str | None = None


PROVIDER_CALL_KINDS: dict[str, tuple[str, ...]] = {
    "anthropic": ("server_tool_use", "mcp_tool_use"),
    "openai_responses": (
        "local_shell_call", "shell_call", "apply_patch_call", "computer_call", "custom_tool_call",
        "mcp_approval_request",
    ),
}
"""Per provider family, the :class:`ProviderBlock` kinds that are a call answered by a later
block with the same :attr:`ProviderBlock.call_id` (Anthropic: ``anthropic/types/server_tool_use_block_param.py``,
``beta/beta_mcp_tool_use_block_param.py``; Responses: ``openai/types/responses/response_input_item_param.py``)."""

PROVIDER_RESULT_KINDS: dict[str, tuple[str, ...]] = {
    "anthropic": (
        "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
        "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
        "tool_search_tool_result", "mcp_tool_result",
    ),
    "openai_responses": (
        "local_shell_call_output", "shell_call_output", "apply_patch_call_output", "computer_call_output",
        "custom_tool_call_output", "mcp_approval_response",
    ),
}
"""Per provider family, the :class:`ProviderBlock` kinds that answer a call of
:data:`PROVIDER_CALL_KINDS` (same ``call_id``); the API refuses one whose call is not sent
before it (rule ``provider-result-without-call``)."""


OutputBlock = Annotated[Union[TextBlock, ImageBlock, DocumentBlock, SearchResultBlock], Field(discriminator="type")]
"""What a tool result holds: text and images, and (Anthropic ``ToolResultBlockParam.content``,
Responses ``function_call_output`` ``input_file`` parts) documents and search results."""


class ToolResultBlock(_Block):
    """The result of one tool call.

    ``state`` is ``success`` or ``error`` (a failed result is kept by default: it stops the
    model from repeating the same call). ``output`` holds text and image blocks.
    """

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    name: str | None = None
    state: Literal["success", "error"] = "success"
    output: list[OutputBlock] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The concatenated text of the output blocks (images omitted)."""
        return "".join(b.text for b in self.output if isinstance(b, TextBlock))


Block = Annotated[
    Union[
        TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock, ImageBlock, DocumentBlock,
        SearchResultBlock, AudioBlock, RefusalBlock, ProviderBlock,
    ],
    Field(discriminator="type"),
]
BLOCK_TYPES: tuple[str, ...] = (
    "text", "thinking", "tool_use", "tool_result", "image", "document", "search_result", "audio",
    "refusal", "provider",
)


class Message(BaseModel):
    """One message of a context: ``{id, role, name?, blocks, metadata}``.

    ``id`` is unique within a session (adapters assign ``m0001``-style ids when a format has
    none). ``metadata`` carries format-specific fields and, under ``"ctxwise"``, ctxwise's own
    marker (:class:`Marker`), such as ``{"ctxwise": {"kind": "summary"}}`` for a summary.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    role: Role
    name: str | None = None
    blocks: list[Block] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)
    """Per-object memo (token counts by counter name, fingerprint). Never copied."""

    @field_validator("id")
    @classmethod
    def _id_not_blank(cls, v: str) -> str:
        if not v:
            raise ValueError("message id must be a non-empty string")
        return v

    # -- convenient views -------------------------------------------------------------

    @property
    def text(self) -> str:
        """The message's text blocks joined with newlines (thinking, tools and images omitted)."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    def _of_type(self, key: str, tp: type) -> list[Any]:
        """The blocks of type ``tp``, in order (a new list; the selection is kept in the memo)."""
        cache = self.__pydantic_private__["_cache"]  # type: ignore[index]  # the slot, as memo()
        found = cache.get(key)
        if found is None:
            found = cache[key] = tuple(b for b in self.blocks if isinstance(b, tp))
        return list(found)

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The ``tool_use`` blocks, in order."""
        return self._of_type("blocks/tool_use", ToolUseBlock)

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The ``tool_result`` blocks, in order."""
        return self._of_type("blocks/tool_result", ToolResultBlock)

    @property
    def thinking(self) -> list[ThinkingBlock]:
        """The ``thinking`` blocks, in order."""
        return self._of_type("blocks/thinking", ThinkingBlock)

    @property
    def kind(self) -> str | None:
        """The kind of ctxwise's own message (``summary``, ``facts``, ``user_memory``; see
        :attr:`Marker.kind`) or None."""
        if MARKER_KEY not in self.metadata:
            return None
        return Marker.read(self).kind

    @property
    def beside(self) -> list[Any]:
        """Items an integration sends right after this message, verbatim, that ctxwise does not
        read into blocks (``metadata["ctxwise"]["beside"]``: JSON values, e.g. the Agents SDK's
        hosted-tool items, see :meth:`ctxwise.Session.amend`). Counted in the message's size
        (their JSON text, an inline ``data:image/...`` URL by the image rule); never rendered
        by ctxwise, and they leave the context with the message."""
        if MARKER_KEY not in self.metadata:
            return []
        return list(Marker.read(self).beside or ())

    def fingerprint(self) -> str:
        """A stable SHA-256 hex digest of the message's canonical JSON (id included)."""
        fp = self._cache.get("fingerprint")
        if fp is None:
            fp = hashlib.sha256(canonical_json(self).encode("utf-8")).hexdigest()
            self._cache["fingerprint"] = fp
        return fp

    def __eq__(self, other: object) -> bool:
        """Equal when every field is equal (the private memo is ignored)."""
        if not isinstance(other, Message):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def memo(self) -> dict[str, Any]:
        """This object's private memo dict (counters store their counts here).

        Messages are frozen, so a memo entry stays true for the object's life; an edited copy
        (``model_copy``) starts with an empty memo.
        """
        return self.__pydantic_private__["_cache"]  # type: ignore[index,no-any-return]  # the slot, not pydantic's __getattr__

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> "Message":
        """Like pydantic's ``model_copy``, but the copy's memo starts empty."""
        new = super().model_copy(update=update, deep=deep)
        object.__setattr__(new, "__pydantic_private__", {"_cache": {}})
        return new


_T = TypeVar("_T")


def memo_on(sources: Sequence[Any], tag: str, key: Hashable, compute: Callable[[], _T]) -> _T:
    """``compute()``, a pure function of the objects ``sources`` (a message first, then any
    objects, compared by identity) and of ``key``, kept in ``sources[0]``'s memo under
    ``tag``: one slot per tag, reused while the same ``key`` and the same objects ask again,
    replaced otherwise. Messages are frozen, so an edit (a new object) never meets a stale
    entry."""
    memo = sources[0].memo()
    slot = memo.get(tag)
    if slot is not None and (slot[0] is key or slot[0] == key):
        others = slot[1]
        n = len(sources) - 1
        if len(others) == n and (n == 0 or (others[0] is sources[1] if n == 1
                                            else all(map(operator.is_, others, sources[1:])))):
            return slot[2]  # type: ignore[no-any-return]
    found = compute()
    memo[tag] = (key, tuple(sources[1:]), found)
    return found


_S = TypeVar("_S")


def fold_on(messages: Sequence[Message], tag: str, key: object, init: _S,
            step: Callable[[_S, int, Message], _S], keep: int = 4) -> _S:
    """The left fold ``step(...step(step(init, 0, messages[0]), 1, messages[1])...)``, a pure
    function of the message objects (by identity) and of ``key``, resumed from the longest
    list folded before that ``messages`` starts with (the same objects, an equal ``key``):
    a list that extends the previous call's costs its new messages only, plus one identity
    comparison per message. The last ``keep`` lists folded are kept, with their states, in
    ``messages[0]``'s memo under ``tag``; any other list is folded from scratch. States are
    shared between calls: ``step`` returns a new state and never changes one."""
    if not messages:
        return init
    memo = messages[0].memo()
    kept: list[tuple[object, tuple[Message, ...], Any]] = memo.get(tag) or []
    best: tuple[object, tuple[Message, ...], Any] | None = None
    for entry in kept:
        k, prefix, _ = entry
        if (len(prefix) <= len(messages) and (best is None or len(prefix) > len(best[1]))
                and (k is key or k == key)
                and all(map(operator.is_, prefix, messages))):
            best = entry
    start, state = (0, init) if best is None else (len(best[1]), best[2])
    for i in range(start, len(messages)):
        state = step(state, i, messages[i])
    if best is None or start < len(messages):
        memo[tag] = ([e for e in kept if e is not best] + [(key, tuple(messages), state)])[-keep:]
    return state


MarkKind = Literal["summary", "facts", "user_memory", "loop_close"]
"""The kinds of message ctxwise writes itself (:attr:`Marker.kind`)."""

MARKER_KEY = "ctxwise"
"""The :attr:`Message.metadata` key that holds ctxwise's :class:`Marker`."""


class Marker(BaseModel):
    """ctxwise's own keys in ``Message.metadata["ctxwise"]``: what ctxwise wrote or did to a message.

    Every field is optional; None means the key is absent. The stored JSON is a plain object
    with these keys (and any key a newer version wrote, kept as it is). :meth:`read` gives the
    typed view of a message's marker; :meth:`with_` gives the metadata with keys set, the
    stored order kept and new keys appended, so the stored bytes are the same as writing the
    dict by hand. Values are checked strictly (no coercion): a stored key whose value has
    the wrong type reads as absent; :meth:`with_` raises :class:`~ctxwise.errors.FormatError` for it.
    """

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    KEY: ClassVar[str] = MARKER_KEY
    """The :attr:`Message.metadata` key that holds the marker (``"ctxwise"``)."""

    kind: MarkKind | None = None
    """The kind of message ctxwise wrote: ``summary``, ``facts`` (the pinned fact block),
    ``user_memory`` (the long-term memory block) or ``loop_close`` (the note that closes an open
    tool loop whose bound reasoning had to go, :mod:`ctxwise.compaction.loop_close`). None for
    a message the caller appended."""
    replaced: list[str] | None = None
    """A summary's: the ids of the messages it stands for, in order."""
    rounds: int | None = None
    """A summary's: how many user rounds it stands for (those of the segments it rolls in included)."""
    summarizer: str | None = None
    """A summary's: the name of the summarizer that wrote it."""
    fact_ids: list[str] | None = None
    """The fact block's: the ids of the facts it shows, in order."""
    entry_ids: list[int | str] | None = None
    """The user-memory block's: the ids of the memory entries it shows, in order."""
    beside: list[Any] | None = None
    """JSON items an integration sends right after the message, verbatim (:attr:`Message.beside`)."""
    normalized: list[dict[str, Any]] | None = None
    """Notes on how the message was normalized at append (each a dict with a ``rule``)."""
    omitted: str | None = None
    """Why the message is left out of the context (``empty_reply``, ``refusal``)."""
    cleared: list[str] | None = None
    """The ``tool_use_id`` of every tool result whose body clearing replaced by a placeholder."""
    cleared_chars: int | None = None
    """The characters of the bodies the latest clearing of the message replaced."""
    cleared_inputs: list[str] | None = None
    """The ids of the ``tool_use`` blocks whose large input clearing replaced."""
    pruned_thinking: int | None = None
    """How many thinking blocks the thinking stage dropped from the message."""
    shortened_from: int | None = None
    """A summary's: the characters of its body before it was shortened to fit."""
    truncated: bool | None = None
    """True when the in-flight cut shortened the message's tool results."""
    empty_marked: bool | None = None
    """True when ctxwise marked the message's empty content so a provider accepts it."""
    interrupted: bool | None = None
    """True for a tool message ctxwise wrote to answer calls left unanswered (``close_pending``)."""
    bound_prefix: str | None = None
    """An assistant message's with reasoning, on a provider that binds reasoning to its prefix:
    the SHA-256 digest of what was sent before its reasoning in the request that produced it
    (:func:`ctxwise.providers.binding.bound_digest`), written at append."""

    @classmethod
    def read(cls, message: Message) -> "Marker":
        """The marker of ``message`` (empty when it has none), kept in the message's memo.

        Never raises: a marker that is not a JSON object reads as empty, a key whose value has
        the wrong type as absent."""
        memo = message.memo()
        found = memo.get("ctxwise/marker")
        if found is None:
            found = memo["ctxwise/marker"] = cls._parse(message.metadata.get(MARKER_KEY))
        return found

    @classmethod
    def _parse(cls, raw: Any) -> "Marker":
        if not isinstance(raw, dict):
            return _EMPTY_MARKER
        data = dict(raw)
        while True:
            try:
                return cls.model_validate(data)
            except ValidationError as e:
                bad = {err["loc"][0] for err in e.errors() if err["loc"]}
                if not bad & set(data):
                    return _EMPTY_MARKER
                data = {k: v for k, v in data.items() if k not in bad}

    @classmethod
    def with_(cls, target: Message | Mapping[str, Any], **fields: Any) -> dict[str, Any]:
        """The metadata of ``target`` (a message or a metadata dict) with ``fields`` set in its
        marker: a new dict, the marker's stored keys in their order, new keys after them.

        Raises :class:`~ctxwise.errors.FormatError` (a ``ValueError``) naming the field for a
        name that is not a :class:`Marker` field or a value of the wrong type; ``target`` is
        never changed."""
        hint = "give Marker's own fields with the types its docstring gives (a new key needs a new field)"
        unknown = sorted(set(fields) - set(cls.model_fields))
        if unknown:
            raise FormatError("Marker.with_", f"{', '.join(unknown)} is not a marker field; fields: "
                                              f"{', '.join(cls.model_fields)}", hint=hint)
        try:
            cls.model_validate(fields)
        except ValidationError as e:
            err = e.errors()[0]
            raise FormatError(f"Marker.with_, field {'.'.join(map(str, err['loc']))}",
                              f"{err['msg']} (got {type(err['input']).__name__})", hint=hint) from None
        md = dict(target.metadata if isinstance(target, Message) else target)
        raw = md.get(MARKER_KEY)
        md[MARKER_KEY] = {**(raw if isinstance(raw, dict) else {}), **fields}
        return md

    @staticmethod
    def stored(target: Message | Mapping[str, Any]) -> dict[str, Any]:
        """A copy of the marker of ``target`` (a message or a metadata dict) as stored: every
        key, in the stored order, values unchecked; ``{}`` when there is none. For code that
        rewrites the marker whole and must keep its bytes."""
        raw = (target.metadata if isinstance(target, Message) else target).get(MARKER_KEY)
        return dict(raw) if isinstance(raw, dict) else {}


_EMPTY_MARKER = Marker()


def canonical_json(message: Message) -> str:
    """The message as compact JSON with sorted keys and UTF-8 kept (deterministic, byte-stable)."""
    return json.dumps(
        message.model_dump(mode="json", exclude_defaults=False),
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )


def text_message(id: str, role: Role, text: str, **metadata: Any) -> Message:
    """Shorthand for a message holding one :class:`TextBlock`."""
    return Message(id=id, role=role, blocks=[TextBlock(text=text)], metadata=dict(metadata))


def ensure_unique_ids(messages: list[Message]) -> None:
    """Raise ``ValueError`` naming the index of the first repeated message id."""
    seen: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.id in seen:
            raise ValueError(f"message {i}: id {m.id!r} already used by message {seen[m.id]}")
        seen[m.id] = i
