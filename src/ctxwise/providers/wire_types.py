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


class ChatText(TypedDict):
    """``ChatCompletionContentPartTextParam``."""

    type: Literal["text"]
    text: str


class ChatImageURL(TypedDict):
    """``chat_completion_content_part_image_param.ImageURL``."""

    url: str


class ChatImage(TypedDict):
    """``ChatCompletionContentPartImageParam``."""

    type: Literal["image_url"]
    image_url: ChatImageURL


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


class ChatUser(TypedDict, total=False):
    """``ChatCompletionUserMessageParam``."""

    role: Required[Literal["user"]]
    content: Required[Union[str, List[Annotated[Union[ChatText, ChatImage], Field(discriminator="type")]]]]
    name: str


class ChatAssistant(TypedDict, total=False):
    """``ChatCompletionAssistantMessageParam``."""

    role: Required[Literal["assistant"]]
    content: Union[str, List[ChatText], None]
    name: str
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
    """``TextBlockParam``."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[Optional[ACacheControl]]


class ABase64Source(TypedDict):
    """``Base64ImageSourceParam``."""

    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class AURLSource(TypedDict):
    """``URLImageSourceParam``."""

    type: Literal["url"]
    url: str


class AImage(TypedDict):
    """``ImageBlockParam``."""

    type: Literal["image"]
    source: Annotated[Union[ABase64Source, AURLSource], Field(discriminator="type")]
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
    content: Union[str, List[Annotated[Union[AText, AImage], Field(discriminator="type")]]]
    is_error: bool
    cache_control: Optional[ACacheControl]


AUserBlock = Annotated[Union[AText, AImage, AToolResult], Field(discriminator="type")]
AAssistantBlock = Annotated[Union[AText, AImage, AThinking, ARedactedThinking, AToolUse], Field(discriminator="type")]


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


class RInputImage(TypedDict):
    """``ResponseInputImageParam``."""

    type: Literal["input_image"]
    image_url: str
    detail: Literal["low", "high", "auto"]


RInputPart = Annotated[Union[RInputText, RInputImage], Field(discriminator="type")]


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


class ROutputMessage(TypedDict):
    """``ResponseOutputMessageParam``."""

    type: Literal["message"]
    role: Literal["assistant"]
    id: str
    status: Literal["in_progress", "completed", "incomplete"]
    content: List[ROutputText]


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
