"""ctxwise's own request types: the exact subset of each provider's request that the
renderers write, as TypedDicts (checked with pydantic, unknown keys refused at every depth).

Each type names the SDK type it is a strict subset of (same required keys or more, no key
the SDK type lacks); ``tests/test_wire_schema.py`` proves that with the ``anthropic`` and
``openai`` packages installed, so a payload these types accept is one the SDK types accept.
They let the wire check run where the SDKs are not installed (the core install does not
need ``anthropic``).
"""

from __future__ import annotations

from typing import Annotated, Dict, List, Literal, Optional, Union

from pydantic import Field
from typing_extensions import NotRequired, Required, TypedDict

# -- Chat Completions (openai.types.chat) ----------------------------------------------------


class CacheBreakpoint(TypedDict, total=False):
    """``chat_completion_content_part_text_param.PromptCacheBreakpoint`` (the same shape on the
    other content parts and on Responses input parts): the end of a reusable prompt prefix."""

    mode: Required[Literal["explicit"]]
    ttl: Literal["30m", "12h"]


class ChatText(TypedDict):
    """``ChatCompletionContentPartTextParam``."""

    type: Literal["text"]
    text: str
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


class ChatImageURL(TypedDict):
    """``chat_completion_content_part_image_param.ImageURL``."""

    url: str
    detail: NotRequired[Literal["auto", "low", "high"]]


class ChatInputAudioData(TypedDict):
    """``chat_completion_content_part_input_audio_param.InputAudio``."""

    data: str
    format: Literal["wav", "mp3"]


class ChatInputAudio(TypedDict):
    """``ChatCompletionContentPartInputAudioParam``."""

    type: Literal["input_audio"]
    input_audio: ChatInputAudioData
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


class ChatFileData(TypedDict, total=False):
    """``chat_completion_content_part_param.FileFile``."""

    file_data: str
    file_id: str
    filename: str


class ChatFile(TypedDict):
    """``chat_completion_content_part_param.File``."""

    type: Literal["file"]
    file: ChatFileData
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


class ChatImage(TypedDict):
    """``ChatCompletionContentPartImageParam``."""

    type: Literal["image_url"]
    image_url: ChatImageURL
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


class ChatFunction(TypedDict):
    """``chat_completion_message_function_tool_call_param.Function``."""

    name: str
    arguments: str


class ChatToolCall(TypedDict):
    """``ChatCompletionMessageFunctionToolCallParam``."""

    id: str
    type: Literal["function"]
    function: ChatFunction


class ChatSystem(TypedDict, total=False):
    """``ChatCompletionSystemMessageParam``."""

    role: Required[Literal["system"]]
    content: Required[Union[str, List[ChatText]]]
    name: str


class ChatDeveloper(TypedDict, total=False):
    """``ChatCompletionDeveloperMessageParam``."""

    role: Required[Literal["developer"]]
    content: Required[Union[str, List[ChatText]]]
    name: str


class ChatUser(TypedDict, total=False):
    """``ChatCompletionUserMessageParam``."""

    role: Required[Literal["user"]]
    content: Required[Union[str, List[Annotated[Union[ChatText, ChatImage, ChatInputAudio, ChatFile],
                                                Field(discriminator="type")]]]]
    name: str


class ChatAssistant(TypedDict, total=False):
    """``ChatCompletionAssistantMessageParam``."""

    role: Required[Literal["assistant"]]
    content: Union[str, List[ChatText], None]
    name: str
    refusal: Optional[str]
    tool_calls: List[ChatToolCall]


class ChatTool(TypedDict):
    """``ChatCompletionToolMessageParam``."""

    role: Literal["tool"]
    tool_call_id: str
    content: Union[str, List[ChatText]]


# -- Anthropic Messages (anthropic.types) ----------------------------------------------------


class ACacheControl(TypedDict, total=False):
    """``CacheControlEphemeralParam``."""

    type: Required[Literal["ephemeral"]]
    ttl: Literal["5m", "1h"]


class AText(TypedDict):
    """``TextBlockParam`` (``citations``: ``TextCitationParam`` objects, kept as read)."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[Optional[ACacheControl]]
    citations: NotRequired[Optional[List[Dict[str, object]]]]


class ABase64Source(TypedDict):
    """``Base64ImageSourceParam``."""

    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class AURLSource(TypedDict):
    """``URLImageSourceParam``."""

    type: Literal["url"]
    url: str


class AFileSource(TypedDict):
    """``FileImageSourceParam`` / ``FileDocumentSourceParam`` (a Files-API id)."""

    type: Literal["file"]
    file_id: str


class AImage(TypedDict):
    """``ImageBlockParam``."""

    type: Literal["image"]
    source: Annotated[Union[ABase64Source, AURLSource, AFileSource], Field(discriminator="type")]
    cache_control: NotRequired[Optional[ACacheControl]]


class ABase64PDFSource(TypedDict):
    """``Base64PDFSourceParam``."""

    type: Literal["base64"]
    media_type: Literal["application/pdf"]
    data: str


class APlainTextSource(TypedDict):
    """``PlainTextSourceParam``."""

    type: Literal["text"]
    media_type: Literal["text/plain"]
    data: str


class AContentSource(TypedDict):
    """``ContentBlockSourceParam``."""

    type: Literal["content"]
    content: Union[str, List[Annotated[Union[AText, AImage], Field(discriminator="type")]]]


class ACitationsConfig(TypedDict, total=False):
    """``CitationsConfigParam``."""

    enabled: bool


class ADocument(TypedDict):
    """``DocumentBlockParam``."""

    type: Literal["document"]
    source: Annotated[Union[ABase64PDFSource, APlainTextSource, AContentSource, AURLSource, AFileSource],
                      Field(discriminator="type")]
    cache_control: NotRequired[Optional[ACacheControl]]
    citations: NotRequired[Optional[ACitationsConfig]]
    context: NotRequired[Optional[str]]
    title: NotRequired[Optional[str]]


class ASearchResult(TypedDict):
    """``SearchResultBlockParam``."""

    type: Literal["search_result"]
    source: str
    title: str
    content: List[AText]
    cache_control: NotRequired[Optional[ACacheControl]]
    citations: NotRequired[ACitationsConfig]


class AServerToolUse(TypedDict):
    """``ServerToolUseBlockParam`` (``caller``: a ``DirectCallerParam`` / ``ServerToolCallerParam``)."""

    type: Literal["server_tool_use"]
    id: str
    name: Literal["web_search", "web_fetch", "code_execution", "bash_code_execution",
                  "text_editor_code_execution", "tool_search_tool_regex", "tool_search_tool_bm25"]
    input: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]
    caller: NotRequired[Dict[str, object]]


class AWebSearchToolResult(TypedDict):
    """``WebSearchToolResultBlockParam`` (``content``: result blocks or an error object, kept as read)."""

    type: Literal["web_search_tool_result"]
    tool_use_id: str
    content: Union[List[Dict[str, object]], Dict[str, object]]
    cache_control: NotRequired[Optional[ACacheControl]]
    caller: NotRequired[Dict[str, object]]


class AWebFetchToolResult(TypedDict):
    """``WebFetchToolResultBlockParam``."""

    type: Literal["web_fetch_tool_result"]
    tool_use_id: str
    content: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]
    caller: NotRequired[Dict[str, object]]


class ACodeExecutionToolResult(TypedDict):
    """``CodeExecutionToolResultBlockParam``."""

    type: Literal["code_execution_tool_result"]
    tool_use_id: str
    content: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]


class ABashCodeExecutionToolResult(TypedDict):
    """``BashCodeExecutionToolResultBlockParam``."""

    type: Literal["bash_code_execution_tool_result"]
    tool_use_id: str
    content: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]


class ATextEditorCodeExecutionToolResult(TypedDict):
    """``TextEditorCodeExecutionToolResultBlockParam``."""

    type: Literal["text_editor_code_execution_tool_result"]
    tool_use_id: str
    content: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]


class AToolSearchToolResult(TypedDict):
    """``ToolSearchToolResultBlockParam``."""

    type: Literal["tool_search_tool_result"]
    tool_use_id: str
    content: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]


class AContainerUpload(TypedDict):
    """``ContainerUploadBlockParam``."""

    type: Literal["container_upload"]
    file_id: str
    cache_control: NotRequired[Optional[ACacheControl]]


class AMCPToolUse(TypedDict):
    """``beta.BetaMCPToolUseBlockParam`` (beta: sent with the MCP connector beta)."""

    type: Literal["mcp_tool_use"]
    id: str
    name: str
    server_name: str
    input: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]


class AMCPToolResult(TypedDict):
    """``beta.BetaRequestMCPToolResultBlockParam``."""

    type: Literal["mcp_tool_result"]
    tool_use_id: str
    content: NotRequired[Union[str, List[AText]]]
    is_error: NotRequired[bool]
    cache_control: NotRequired[Optional[ACacheControl]]


class ACompaction(TypedDict):
    """``beta.BetaCompactionBlockParam`` (beta ``compact-2026-09-04``: the signed summary a
    compaction request returned, sent back verbatim in place of what it summarizes)."""

    type: Literal["compaction"]
    content: NotRequired[Optional[str]]
    encrypted_content: NotRequired[Optional[str]]
    signature: NotRequired[Optional[str]]
    tool_changes: NotRequired[Optional[List[Dict[str, object]]]]
    cache_control: NotRequired[Optional[ACacheControl]]


class AThinking(TypedDict):
    """``ThinkingBlockParam``."""

    type: Literal["thinking"]
    thinking: str
    signature: str


class ARedactedThinking(TypedDict):
    """``RedactedThinkingBlockParam``."""

    type: Literal["redacted_thinking"]
    data: str


class AToolUse(TypedDict):
    """``ToolUseBlockParam``."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: Dict[str, object]
    cache_control: NotRequired[Optional[ACacheControl]]


class AToolResult(TypedDict, total=False):
    """``ToolResultBlockParam``."""

    type: Required[Literal["tool_result"]]
    tool_use_id: Required[str]
    content: Union[str, List[Annotated[Union[AText, AImage, "ADocument", "ASearchResult"], Field(discriminator="type")]]]
    is_error: bool
    cache_control: Optional[ACacheControl]


AUserBlock = Annotated[Union[
    AText, AImage, AToolResult, ADocument, ASearchResult, AServerToolUse, AWebSearchToolResult, AWebFetchToolResult,
    ACodeExecutionToolResult, ABashCodeExecutionToolResult, ATextEditorCodeExecutionToolResult,
    AToolSearchToolResult, AContainerUpload, AMCPToolUse, AMCPToolResult, ACompaction,
], Field(discriminator="type")]
AAssistantBlock = Annotated[Union[
    AText, AImage, AThinking, ARedactedThinking, AToolUse, ADocument, ASearchResult, AServerToolUse,
    AWebSearchToolResult, AWebFetchToolResult, ACodeExecutionToolResult, ABashCodeExecutionToolResult,
    ATextEditorCodeExecutionToolResult, AToolSearchToolResult, AContainerUpload, AMCPToolUse, AMCPToolResult,
    ACompaction,
], Field(discriminator="type")]
"""Server-tool, MCP and container blocks sit in assistant turns on the wire, but the SDK's
``MessageContentParam`` takes every block in either role, and so do these."""


class AUser(TypedDict):
    """``UserMessageParam``."""

    role: Literal["user"]
    content: Union[str, List[AUserBlock]]


class AAssistant(TypedDict):
    """``AssistantMessageParam``."""

    role: Literal["assistant"]
    content: Union[str, List[AAssistantBlock]]


ASystem = Union[str, List[AText]]
"""``message_create_params.MessageCreateParamsBase["system"]``."""


class ASystemMessage(TypedDict):
    """``beta.BetaSystemMessageParam`` (a mid-conversation system message, beta; text only)."""

    role: Literal["system"]
    content: Union[str, List[AText]]

# -- Responses input items (openai.types.responses) ------------------------------------------


class RInputText(TypedDict):
    """``ResponseInputTextParam``."""

    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


class RInputImage(TypedDict):
    """``ResponseInputImageParam`` (an ``image_url`` or a Files-API ``file_id``)."""

    type: Literal["input_image"]
    image_url: NotRequired[str]
    file_id: NotRequired[str]
    detail: Literal["low", "high", "auto", "original"]
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


class RInputFile(TypedDict):
    """``ResponseInputFileParam``."""

    type: Literal["input_file"]
    file_data: NotRequired[str]
    file_id: NotRequired[str]
    file_url: NotRequired[str]
    filename: NotRequired[str]
    prompt_cache_breakpoint: NotRequired[CacheBreakpoint]


RInputPart = Annotated[Union[RInputText, RInputImage, RInputFile], Field(discriminator="type")]


class RMessage(TypedDict, total=False):
    """``EasyInputMessageParam`` (``type`` may be left out: the SDK's own user messages are
    ``{"role", "content"}``)."""

    type: Literal["message"]
    role: Required[Literal["user", "assistant", "system", "developer"]]
    content: Required[Union[str, List[RInputPart]]]


class ROutputText(TypedDict):
    """``ResponseOutputTextParam``."""

    type: Literal["output_text"]
    text: str
    annotations: List[object]


class ROutputRefusal(TypedDict):
    """``ResponseOutputRefusalParam``."""

    type: Literal["refusal"]
    refusal: str


class ROutputMessage(TypedDict):
    """``ResponseOutputMessageParam``."""

    type: Literal["message"]
    role: Literal["assistant"]
    id: str
    status: Literal["in_progress", "completed", "incomplete"]
    content: List[Annotated[Union[ROutputText, ROutputRefusal], Field(discriminator="type")]]


class RSummary(TypedDict):
    """``response_reasoning_item_param.Summary``."""

    type: Literal["summary_text"]
    text: str


class RReasoning(TypedDict, total=False):
    """``ResponseReasoningItemParam``."""

    type: Required[Literal["reasoning"]]
    id: Required[str]
    summary: Required[List[RSummary]]
    encrypted_content: Optional[str]


class RFunctionCall(TypedDict, total=False):
    """``ResponseFunctionToolCallParam``."""

    type: Required[Literal["function_call"]]
    call_id: Required[str]
    name: Required[str]
    arguments: Required[str]
    id: str
    status: Literal["in_progress", "completed", "incomplete"]


class RFunctionCallOutput(TypedDict):
    """``response_input_item_param.FunctionCallOutput``."""

    type: Literal["function_call_output"]
    call_id: str
    output: Union[str, List[RInputPart]]


RProviderItem = Dict[str, object]
"""A Responses item ctxwise keeps verbatim (``compaction``, ``compaction_trigger``,
``configuration_update``, hosted and client-run tool calls and outputs): its own check is
only that it is an object with a known ``type``; the SDK check validates it against its
member of ``ResponseInputItemParam`` (``openai/types/responses/response_input_item_param.py``)."""
