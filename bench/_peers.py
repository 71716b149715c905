"""The context strategies people use instead of ctxwise, driven through their real code.

Every strategy takes the same thing, the full canonical history before a model call
(``list[ctxwise.messages.Message]``), and returns what it would send, as canonical messages,
plus the time its own code took (milliseconds). The benchmarks then score that list with
``ctxwise.replay.metrics`` exactly as they score ctxwise's payloads.

Converting back to canonical messages goes by identity: a peer message that is the one we
built from canonical message X (or an unchanged copy of it) becomes X itself, so a prompt-cache
prefix and token counts behave exactly as for ctxwise. A peer message the peer changed (a
cleared tool result) becomes an edited copy of X; one it made up (autogen's "Skipped N
messages." note) becomes a new user message with a fixed id.

Conversions are incremental (each message is converted once per conversation) and are not
timed: a LangChain or autogen user already holds their messages in those types. The timed
part is only the peer's own call (``trim_messages``, the middleware's ``wrap_model_call``,
``get_messages``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from ctxwise.messages import Message, TextBlock, ToolResultBlock
from ctxwise.tokens.base import TokenCounter

# --------------------------------------------------------------------------- helpers


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def _split_system(history: Sequence[Message]) -> tuple[Message | None, list[Message]]:
    if history and history[0].role == "system":
        return history[0], list(history[1:])
    return None, list(history)


class Strategy:
    """One way of building the payload from the history. ``reset()`` starts a conversation."""

    name = ""
    budget = 0

    def reset(self) -> None:  # pragma: no cover - trivial
        pass

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        raise NotImplementedError


# --------------------------------------------------------------------------- no management, rolling window


class Everything(Strategy):
    """No management: the whole history, every call."""

    name = "no management"

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        t0 = time.perf_counter()
        out = list(history)
        return out, _ms(t0)


class EverythingValid(Strategy):
    """No management, made valid: the whole history, every call, with an empty tool result
    given the one-line marker ctxwise gives it at append (``ctxwise.engine.mark_empty_result``;
    Anthropic rejects empty content). The cheapest payload that sends everything and is valid
    on every provider: what "sends exactly what no management sends" is measured against."""

    name = "no management, valid"

    def __init__(self) -> None:
        self._marked: dict[str, Message] = {}

    def reset(self) -> None:
        self._marked = {}

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        from ctxwise.engine import mark_empty_result

        t0 = time.perf_counter()
        out = [self._marked.get(m.id) or self._marked.setdefault(m.id, mark_empty_result(m)) for m in history]
        return out, _ms(t0)


class RollingWindow(Strategy):
    """The system prompt plus as many of the latest messages as fit, oldest dropped first,
    with no regard for tool cycles (what a hand-written ``history[-n:]`` does)."""

    name = "rolling window"

    def __init__(self, budget: int, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        t0 = time.perf_counter()
        system, rest = _split_system(history)
        room = self.budget - self.counter.frame.reply_priming - (self.counter.count_message(system) if system else 0)
        k = len(rest)
        used = 0
        while k > 0:
            size = self.counter.count_message(rest[k - 1])
            if used + size > room:
                break
            used += size
            k -= 1
        out = ([system] if system else []) + rest[k:]
        return out, _ms(t0)


# --------------------------------------------------------------------------- LangChain


class LangChainView:
    """Canonical messages as LangChain messages (ids kept) and back."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.reset()

    def reset(self) -> None:
        self.lc: list[Any] = []
        self.canon: dict[str, Message] = {}
        self.made: dict[str, Any] = {}

    def extend(self, history: Sequence[Message]) -> list[Any]:
        """The LangChain list for ``history`` (a prefix-extension of the previous one)."""
        for m in history[len(self.lc):]:
            x = to_langchain(m)
            self.lc.append(x)
            self.canon[m.id] = m
            self.made[m.id] = x
        return self.lc

    def back(self, messages: Sequence[Any]) -> list[Message]:
        """Canonical messages for a LangChain list the peer returned."""
        out: list[Message] = []
        for x in messages:
            orig = self.canon[x.id]
            made = self.made[x.id]
            if x is made or (x.content == made.content and getattr(x, "tool_calls", None) == getattr(made, "tool_calls", None)):
                out.append(orig)
            else:
                out.append(_edited_from_langchain(orig, x))
        return out

    def count(self, messages: Sequence[Any]) -> int:
        """Our o200k counter over LangChain messages (via the canonical messages)."""
        return self.counter.count(self.back(messages))


def to_langchain(m: Message) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    if m.role == "system":
        return SystemMessage(content=m.text, id=m.id)
    if m.role == "user":
        return HumanMessage(content=m.text, id=m.id)
    if m.role == "assistant":
        calls = [{"name": b.name, "args": dict(b.input), "id": b.id, "type": "tool_call"} for b in m.tool_uses]
        return AIMessage(content=m.text, tool_calls=calls, id=m.id)
    if m.role == "tool":
        (r,) = m.tool_results
        return ToolMessage(content=r.text, tool_call_id=r.tool_use_id, name=r.name, id=m.id,
                           status="error" if r.state == "error" else "success")
    raise ValueError(f"unexpected role {m.role!r}")


def _edited_from_langchain(orig: Message, x: Any) -> Message:
    """``orig`` with what the peer changed: a tool result's text, a tool call's input."""
    from langchain_core.messages import AIMessage, ToolMessage

    if isinstance(x, ToolMessage):
        blocks = [b.model_copy(update={"output": [TextBlock(text=str(x.content))]}) if isinstance(b, ToolResultBlock) else b
                  for b in orig.blocks]
        return orig.model_copy(update={"blocks": blocks})
    if isinstance(x, AIMessage):
        args = {c["id"]: c["args"] for c in x.tool_calls}
        blocks = [b.model_copy(update={"input": args[b.id]}) if getattr(b, "type", "") == "tool_use" and b.id in args else b
                  for b in orig.blocks]
        return orig.model_copy(update={"blocks": blocks})
    raise ValueError(f"the peer changed a {type(x).__name__}, which this benchmark cannot map back")


class TrimMessages(Strategy):
    """``langchain_core.messages.trim_messages(strategy="last", include_system=True,
    start_on="human")``, LangChain's documented safe setting, with our o200k counter."""

    name = "trim_messages"

    def __init__(self, budget: int, counter: TokenCounter) -> None:
        self.budget = budget
        self.view = LangChainView(counter)

    def reset(self) -> None:
        self.view.reset()

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        from langchain_core.messages import trim_messages

        lc = self.view.extend(history)
        t0 = time.perf_counter()
        out = trim_messages(lc, strategy="last", include_system=True, start_on="human",
                            token_counter=self.view.count, max_tokens=self.budget)
        ms = _ms(t0)
        return self.view.back(out), ms


class _CountingModel:
    """Stands in for the chat model in a ``ModelRequest``: the middleware's
    ``token_count_method="model"`` calls ``model.get_num_tokens_from_messages(system +
    messages, tools)``, so the trigger counts the system prompt too, with our counter."""

    def __init__(self, view: LangChainView) -> None:
        self.view = view

    def get_num_tokens_from_messages(self, messages: Sequence[Any], tools: Any = None) -> int:
        return self.view.count(messages)


class ContextEditing(Strategy):
    """LangChain v1 ``ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=budget)])``
    (the edit's other defaults: keep the 3 latest results, ``clear_at_least=0``, placeholder
    ``[cleared]``), run through its own ``wrap_model_call`` on a ``ModelRequest`` whose
    ``messages`` exclude the system prompt, as ``create_agent`` builds it. As in an agent, the
    state keeps the unedited history; the middleware edits a deep copy on every call."""

    name = "ContextEditing"

    def __init__(self, budget: int, counter: TokenCounter) -> None:
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit, ContextEditingMiddleware

        self.budget = budget
        self.view = LangChainView(counter)
        self.middleware = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=budget)], token_count_method="model")
        self.model = _CountingModel(self.view)

    def reset(self) -> None:
        self.view.reset()

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        from langchain.agents.middleware.types import ModelRequest
        from langchain_core.messages import SystemMessage

        lc = self.view.extend(history)
        system = lc[0] if lc and isinstance(lc[0], SystemMessage) else None
        rest = lc[1:] if system is not None else list(lc)
        return self.prepare_state(system, rest)

    def prepare_state(self, system: Any, rest: list[Any]) -> tuple[list[Message], float]:
        """The middleware over an agent state's ``rest`` (the system prompt held apart)."""
        from langchain.agents.middleware.types import ModelRequest

        request = ModelRequest(model=self.model, messages=rest, system_message=system)  # type: ignore[arg-type]
        seen: list[Any] = []

        def handler(req: Any) -> Any:
            seen.append(req)
            return None

        t0 = time.perf_counter()
        self.middleware.wrap_model_call(request, handler)
        ms = _ms(t0)
        sent = seen[0]
        out = ([sent.system_message] if sent.system_message is not None else []) + list(sent.messages)
        return self.view.back(out), ms


# --------------------------------------------------------------------------- autogen


class AutogenView:
    """Canonical messages as autogen-core ``LLMMessage`` objects and back.

    As in autogen-agentchat's ``AssistantAgent``, the system prompt is held outside the model
    context and put in front of whatever the context returns. The tool messages answering one
    assistant message become one ``FunctionExecutionResultMessage`` (autogen's shape for a
    parallel batch); an assistant's text beside its calls goes in ``thought``.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.system: Message | None = None
        self.messages: list[Any] = []
        self.canon: dict[int, list[Message]] = {}
        self.done = 0

    def extend(self, history: Sequence[Message]) -> list[Any]:
        from autogen_core import FunctionCall
        from autogen_core.models import (
            AssistantMessage,
            FunctionExecutionResult,
            FunctionExecutionResultMessage,
            UserMessage,
        )

        new = list(history[self.done:])
        self.done = len(history)
        i = 0
        while i < len(new):
            m = new[i]
            if m.role == "system":
                self.system = m
                i += 1
                continue
            group = [m]
            if m.role == "user":
                x: Any = UserMessage(content=m.text, source="user")
            elif m.role == "assistant" and m.tool_uses:
                calls = [FunctionCall(id=b.id, name=b.name, arguments=json.dumps(b.input, ensure_ascii=False)) for b in m.tool_uses]
                x = AssistantMessage(content=calls, thought=m.text or None, source="assistant")
            elif m.role == "assistant":
                x = AssistantMessage(content=m.text, source="assistant")
            else:  # tool: this and the following tool messages are one batch
                j = i
                while j + 1 < len(new) and new[j + 1].role == "tool":
                    j += 1
                group = new[i:j + 1]
                results = [FunctionExecutionResult(content=r.text, name=r.name or "", call_id=r.tool_use_id,
                                                   is_error=r.state == "error") for t in group for r in t.tool_results]
                x = FunctionExecutionResultMessage(content=results)
            self.messages.append(x)
            self.canon[id(x)] = group
            i += len(group)
        return self.messages

    def back(self, messages: Sequence[Any]) -> list[Message]:
        """The system prompt plus the canonical messages behind ``messages``."""
        out: list[Message] = [self.system] if self.system is not None else []
        for x in messages:
            group = self.canon.get(id(x))
            if group is None:  # a message the context made up (HeadAndTail's "Skipped N messages.")
                out.append(Message(id="autogen-skipped-note", role="user", blocks=[TextBlock(text=str(x.content))]))
            else:
                out.extend(group)
        return out


class _AutogenSized(Strategy):
    """An autogen model context sized, per call, to the largest size whose payload fits the
    budget (a binary search over sizes, each a fresh context over the same messages; only
    the final ``get_messages()`` is timed)."""

    def __init__(self, budget: int, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter
        self.view = AutogenView()
        self.loop = asyncio.new_event_loop()

    def reset(self) -> None:
        self.view.reset()

    def context(self, size: int, messages: list[Any]) -> Any:
        raise NotImplementedError

    async def _get(self, size: int, messages: list[Any]) -> tuple[list[Any], float]:
        ctx = self.context(size, messages)
        t0 = time.perf_counter()
        out = await ctx.get_messages()
        return out, _ms(t0)

    def _fits(self, size: int, messages: list[Any]) -> bool:
        out, _ = self.loop.run_until_complete(self._get(size, messages))
        return self.counter.count(self.view.back(out)) <= self.budget

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        msgs = self.view.extend(history)
        lo, hi = 1, max(1, len(msgs))
        if self._fits(hi, msgs):
            lo = hi
        else:
            while lo < hi:  # largest size that fits (1 when none does)
                mid = (lo + hi + 1) // 2
                if self._fits(mid, msgs):
                    lo = mid
                else:
                    hi = mid - 1
        out, ms = self.loop.run_until_complete(self._get(lo, msgs))
        return self.view.back(out), ms

    def close(self) -> None:
        self.loop.close()


class AutogenBuffered(_AutogenSized):
    """autogen-core ``BufferedChatCompletionContext(buffer_size=n)``, n the largest that fits."""

    name = "autogen Buffered"

    def context(self, size: int, messages: list[Any]) -> Any:
        from autogen_core.model_context import BufferedChatCompletionContext

        return BufferedChatCompletionContext(buffer_size=size, initial_messages=messages)


class AutogenHeadAndTail(_AutogenSized):
    """autogen-core ``HeadAndTailChatCompletionContext(head_size=2, tail_size=n)``: the opening
    exchange (tau2's greeting and the first request; tau-bench's first request and reply) and
    the largest tail that fits."""

    name = "autogen HeadAndTail"
    head = 2

    def context(self, size: int, messages: list[Any]) -> Any:
        from autogen_core.model_context import HeadAndTailChatCompletionContext

        return HeadAndTailChatCompletionContext(head_size=self.head, tail_size=size, initial_messages=messages)


# --------------------------------------------------------------------------- coding-agent strategies (long loops)


def _cleared(m: Message, text: str) -> Message:
    """``m`` with every tool result's body replaced by ``text`` (the peer's own placeholder)."""
    blocks = [b.model_copy(update={"output": [TextBlock(text=text)]}) if isinstance(b, ToolResultBlock) else b
              for b in m.blocks]
    return m.model_copy(update={"blocks": blocks})


class ObservationMasking(Strategy):
    """Observation masking with a window (Lindenbauer et al. 2025, "The Complexity Trap", as
    in their SWE-agent runs): the latest ``window`` tool results verbatim, every older one
    replaced by a one-line note; the calls and the reasoning stay. No budget: it runs as its
    users run it, a fixed window."""

    name = "observation masking (10)"

    def __init__(self, window: int = 10) -> None:
        self.window = window
        self._masked: dict[str, Message] = {}

    def reset(self) -> None:
        self._masked = {}

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        t0 = time.perf_counter()
        tools = [i for i, m in enumerate(history) if m.role == "tool"]
        old = set(tools[:-self.window]) if self.window else set(tools)
        out = [self._masked.setdefault(m.id, _cleared(m, "Old environment output omitted."))
               if i in old else m for i, m in enumerate(history)]
        return EverythingValid().prepare(out)[0], _ms(t0)


class ClearAllButLast(Strategy):
    """Micro-compaction as coding agents do it: when the history passes the budget, every tool
    result but the latest ``keep`` is cleared (``[Old tool result content cleared]``); once
    cleared, a result stays cleared."""

    name = "clear all but last 5"

    def __init__(self, budget: int, counter: TokenCounter, keep: int = 5) -> None:
        self.budget, self.counter, self.keep = budget, counter, keep
        self._done: dict[str, Message] = {}

    def reset(self) -> None:
        self._done = {}

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        t0 = time.perf_counter()
        out = [self._done.get(m.id, m) for m in history]
        if self.counter.count(out) > self.budget:
            tools = [i for i, m in enumerate(out) if m.role == "tool"]
            for i in tools[:-self.keep] if self.keep else tools:
                if out[i].id not in self._done:
                    self._done[out[i].id] = out[i] = _cleared(out[i], "[Old tool result content cleared]")
        return EverythingValid().prepare(out)[0], _ms(t0)


class HeadAndTailObservations(Strategy):
    """mini-swe-agent's own rule: an observation over 10,000 characters keeps its first and
    last 5,000 with a note between; nothing else is managed."""

    name = "mini-swe-agent head-and-tail"

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._cut: dict[str, Message] = {}

    def reset(self) -> None:
        self._cut = {}

    def _of(self, m: Message) -> Message:
        if m.role != "tool" or len(m.text) <= self.limit:
            return m
        h = self.limit // 2
        text = m.text
        note = (f"{text[:h]}\n<elided_chars>\n{len(text) - self.limit} characters elided\n</elided_chars>\n"
                f"{text[-h:]}")
        return _cleared(m, note)

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        t0 = time.perf_counter()
        out = [self._cut.setdefault(m.id, self._of(m)) for m in history]
        return EverythingValid().prepare(out)[0], _ms(t0)


def _digest(messages: Sequence[Message], target_chars: int, previous: str | None = None) -> str:
    from ctxwise.summarizers import DigestSummarizer

    return DigestSummarizer().summarize(list(messages), previous, target_chars).text


def _next_safe(history: Sequence[Message], i: int) -> int:
    """The first index at or after ``i`` that starts no tool result (a cut there splits no cycle)."""
    while i < len(history) and history[i].role == "tool":
        i += 1
    return i


class OpenHandsCondenser(Strategy):
    """OpenHands' ``LLMSummarizingCondenser(keep_first=1, max_size=100)`` algorithm (the
    package is not installed; its rule re-stated): when the view holds more than ``max_size``
    events, the first ``keep_first`` are kept, the oldest of the rest are forgotten and one
    summary (ctxwise's offline digest standing in for the LLM) takes their place, leaving
    ``max_size // 2`` events; the summary and the cut are sticky."""

    name = "OpenHands condenser"

    def __init__(self, keep_first: int = 1, max_size: int = 100) -> None:
        self.keep_first, self.max_size = keep_first, max_size
        self.reset()

    def reset(self) -> None:
        self.cut = 0
        self.summary: Message | None = None
        self.n = 0

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        t0 = time.perf_counter()
        system, rest = _split_system(history)
        head = rest[:self.keep_first]
        start = max(self.cut, self.keep_first)
        if len(rest) - start + (1 if self.summary else 0) > self.max_size:
            new_cut = _next_safe(rest, len(rest) - (self.max_size // 2 - self.keep_first - 1))
            prev = self.summary.text if self.summary else None
            self.n += 1
            text = _digest(rest[start:new_cut], 4_000, prev)
            self.summary = Message(id=f"openhands-summary-{self.n}", role="user", blocks=[TextBlock(text=text)])
            self.cut = start = new_cut
        out = ([system] if system else []) + head + ([self.summary] if self.summary else []) + rest[start:]
        return EverythingValid().prepare(out)[0], _ms(t0)


class LangChainSummarizationEditing(Strategy):
    """LangChain v1 ``SummarizationMiddleware(trigger=("tokens", budget), keep=("messages",
    20))`` then ``ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=budget)])``, as a
    ``create_agent`` runs them: the summarization rewrites the agent's state (sticky), the
    editing edits a copy per call. The summary is written by ctxwise's offline digest
    (``summarizer=``, the middleware's own hook), with our o200k counter."""

    name = "LangChain Summarization+ContextEditing"

    def __init__(self, budget: int, counter: TokenCounter) -> None:
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        self.budget, self.counter = budget, counter
        self.view = LangChainView(counter)
        self.editing = ContextEditing(budget, counter)
        self.editing.view = self.view
        self.editing.model = _CountingModel(self.view)
        self.summ = SummarizationMiddleware(FakeListChatModel(responses=["(unused: summarizer= writes)"]),
                                            trigger=("tokens", budget), keep=("messages", 20),
                                            token_counter=self._count, summarizer=self._summarize)
        self.reset()

    def _count(self, messages: Sequence[Any]) -> int:
        return self.view.count([x for x in messages])

    def _summarize(self, messages: list[Any]) -> str:
        return _digest(self.view.back(messages), 4_000)

    def reset(self) -> None:
        self.view.reset()
        self.state: list[Any] = []
        self.seen = 0
        self.n = 0

    def prepare(self, history: list[Message]) -> tuple[list[Message], float]:
        from langchain_core.messages import HumanMessage, RemoveMessage, SystemMessage

        lc = self.view.extend(history)
        system = lc[0] if lc and isinstance(lc[0], SystemMessage) else None
        self.state += lc[max(self.seen, 1 if system is not None else 0):]
        self.seen = len(lc)
        t0 = time.perf_counter()
        upd = self.summ.before_model({"messages": self.state}, None)  # type: ignore[arg-type]
        if upd:
            new = [x for x in upd["messages"] if not isinstance(x, RemoveMessage)]
            for x in new:
                if isinstance(x, HumanMessage) and x.additional_kwargs.get("lc_source") == "summarization":
                    self.n += 1
                    x.id = f"lc-summary-{self.n}"
                    self.view.canon[x.id] = Message(id=x.id, role="user", blocks=[TextBlock(text=str(x.content))])
                    self.view.made[x.id] = x
            self.state = new
        ms = _ms(t0)
        out, ms2 = self.editing.prepare_state(system, self.state)
        return out, ms + ms2
