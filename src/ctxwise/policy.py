"""The configuration: the session settings (:class:`Policy`) and the process settings
(:class:`RuntimeSettings`), each loaded from code, a TOML file or ``CTXWISE_*`` env.

A :class:`Policy` defines a session's context: it is stored with the session, and reopening the
session compares the fields the caller set with the stored ones (a difference raises
:class:`~ctxwise.errors.PolicyMismatch`; fields the caller did not set keep their stored
values). Its fields are grouped by stage (:data:`SETTING_GROUPS`: ``clearing.clear_at``, ...).
:class:`RuntimeSettings` say how this process runs (which summarizer, its model, endpoint,
timeout, retries): never stored, never compared.

Sizes are in the policy's ``unit``: ``chars`` (Ragent's rule, see :mod:`ctxwise.tokens`) or
``tokens`` counted with ``tokenizer``. Watermarks are fractions of the *effective budget*
(``budget - reserve_output``):

* ``clear_at`` (0.5): thinking pruning and tool-result clearing may fire above it, and clear in
  one batch down to ``clear_target`` so they do not fire again for many calls (prompt caches
  bill a changed prefix again); with ``edit_when="pays"`` (the default) nothing is edited below
  the hard limit while the prompt cache is warm;
* ``summarize_at`` (0.8): old turns are summarized, at a turn boundary only
  (``edit_when="watermark"``; by default summaries wait for the hard limit);
* ``hard_limit`` (1.0): whole old turns are trimmed.

Presets: ``default``, ``lean`` (small budgets: whole old turns dropped at once, no summary or
clearing; few cache breaks, fewer values kept) and ``ragent``
(Ragent's published behaviour, from the first seed: a
100,000-character budget, 50 % / 80 %, the last 2 tool cycles protected, only
``search_knowledge`` cleared, a Chinese placeholder with the input as ``{key=value, ...}``
cut to 120 characters).

Example::

    policy = Policy.preset("default").model_copy(update={"budget": 4000, "unit": "tokens"})
    policy = Policy.from_toml("ctxwise.toml")      # [ctxwise] table or top-level keys
    policy = Policy.from_env()                     # CTXWISE_BUDGET=4000 CTXWISE_UNIT=tokens ...
    runtime = RuntimeSettings.from_env()           # CTXWISE_SUMMARIZER=openai CTXWISE_SUMMARIZER_TIMEOUT_S=30
"""

from __future__ import annotations

import difflib
import json
import os
import string
import tomllib
from dataclasses import replace
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import PolicyError
from .providers.profiles import (ALL_TURNS_PRICE_MODELS, BREAKPOINT_TARGETS, PROFILES, ProviderProfile, bound_profile,
                                 cache_breakpoint_profile)
from .prices import PRICE_MODELS, PriceModel

if TYPE_CHECKING:
    from .summarizers import Summarizer

DEFAULT_PLACEHOLDER = '[{name} result cleared; {values}recall_tool_result("{id}")]'
"""The default placeholder: the tool's name, the body's key values (``key=value, value; ...``)
and the call that brings the original back. It leaves out ``{input}`` (the ``tool_use`` it
answers, kept just before it, already holds the input) and the original's length. Every token
of it is carried on every later call, so it is short (tuning: ``bench/results/tuning.md``)."""
RAGENT_PLACEHOLDER = "[历史工具结果已省略，原长 {n} 字符，原入参 {input}]"

PROVIDERS = tuple(PROFILES)
"""The known provider names: the keys of :data:`ctxwise.providers.PROFILES` (the one list)."""


class Policy(BaseModel):
    """The session settings: what defines a session's context, stored with it. Frozen; derive
    variants with ``with_(...)`` or ``Policy.preset(name, **changes)`` (``model_copy(update=...)``
    validates too). ``model_fields_set`` holds the fields the caller gave (keyword arguments, a
    preset's own keys, TOML or environment keys, kept through ``with_``): only those are
    compared when a stored session is reopened. Fields are read flat (``policy.clear_at``) and
    named by stage in errors (:data:`SETTING_GROUPS`). The process settings are
    :class:`RuntimeSettings`.

    Sizes are in ``unit``; the watermark fields are fractions of the effective budget
    (``budget - reserve_output``). Each field's docstring is its description
    (``Policy.model_fields[name].description``). Raises :class:`~ctxwise.errors.PolicyError`
    (via the constructors below) for values out of range, e.g. watermarks that are not
    increasing, or an unknown setting.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = "default"
    """A label for reports (the preset's name by default)."""
    enabled: bool = True
    """Off = pass-through: ``prepare`` sends the context unchanged (for A/B comparison)."""

    budget: int = Field(100_000, gt=0)
    """The limit of one request's context, in ``unit`` (output room included; see ``reserve_output``)."""
    unit: Literal["chars", "tokens"] = "chars"
    """``chars`` (Ragent's rule: text, thinking, tool names, inputs, results) or ``tokens``."""
    tokenizer: str = "o200k_base"
    """Counter name used when ``unit == "tokens"`` (see ``ctxwise.tokens.get_counter``)."""
    reserve_output: int = Field(0, ge=0)
    """Room kept for the model's output, subtracted from ``budget``."""
    count_system: bool = True
    """Whether the system prompt counts inside the budget."""
    tools_size: int = Field(0, ge=0)
    """Size of the tool schemas sent with every call (policy unit), counted inside the budget."""

    clear_at: float = Field(0.5, gt=0)
    """Watermark above which thinking pruning and tool-result clearing fire (share of the budget)."""
    clear_target: float = Field(0.35, ge=0)
    """Clearing clears in one batch down to this share, so it does not fire again for many calls."""
    edit_when: Literal["pays", "watermark"] = "pays"
    """When edits fire (prompt caches re-bill a changed prefix): ``pays``, the default: nothing
    is edited while the context fits and the prompt cache is warm (what an early edit saves
    depends on calls that may never come; its break is certain; see
    ``ctxwise.compaction.cost``), so a session that ends under its budget is sent as no
    management would send it; clearing, thinking pruning and summaries fire once the context
    would exceed the hard limit, at a turn boundary or inside a turn (the cut still between
    whole turns), or when the cache is cold (an edit then re-bills nothing). ``watermark``:
    Ragent's rule: clearing whenever the context is above ``clear_at``, summaries at a turn
    boundary above ``summarize_at``."""
    clear_min_batch: float = Field(0.1, ge=0, le=1)
    """Below the hard limit, clearing fires only when it saves at least this share of the
    budget in one batch (fewer, larger batches keep the prompt cache warm longer)."""
    summarize_at: float = Field(0.8, gt=0)
    """Watermark above which old turns are summarized (at a turn boundary only)."""
    hard_limit: float = Field(1.0, gt=0, le=1)
    """Watermark above which whole old turns are trimmed; no request is sent above it."""
    trim_target: float | None = Field(None, ge=0)
    """When whole old turns must be trimmed, trim down to this share of the budget (None:
    just under ``hard_limit``). A lower target drops more at once, so the calls that follow
    append to an unchanged prefix instead of re-billing it on every call (``lean``)."""

    keep_recent_cycles: int = Field(1, ge=0)
    """The latest tool cycles never cleared by the ordinary clearing (a parallel batch is one
    cycle; the current turn is protected on its own, ``protect_current_turn``). 1: the last
    cycle of the previous turns stays whole; one more protected cycle is one result fewer each
    clearing batch can free. Ragent's preset keeps 2."""
    protect_current_turn: bool = True
    """Clearing leaves the current turn alone; only when nothing else makes the call fit are
    its completed cycles (never the in-flight one) cleared as a last resort, with an event."""
    truncate_in_flight: bool = True
    """Very last resort: cut the in-flight cycle's fresh tool results from the middle (their head
    and their tail kept, where test runners and build tools print their verdicts; a note between
    them says how much was cut and names the recall call for the full text) rather than fail,
    when nothing else is left to remove. What is kept is proportional to the result's size."""
    clearable_tools: list[str] = Field(default_factory=lambda: ["*"])
    """Tools whose results may be cleared (``*`` = all)."""
    keep_tools: list[str] = Field(default_factory=list)
    """Tools whose results are never cleared (wins over ``clearable_tools``)."""
    tool_rules: dict[str, str] = Field(default_factory=dict)
    """Resource keys per tool name, over the defaults (``ctxwise.resources``): the
    argument a tool's results are keyed by (``{"fetch_doc": "doc_id"}``, a view), with its
    action (``"sql:run"``; actions ``view``, ``edit``, ``search``, ``run``), or ``""`` for no
    key. A rule's value is keyed in the defaults' one namespace (a path as ``path:`` with its
    line range, a URL, a query, a shell command), so one file's views and edits match whichever
    tool names them. Clearing takes superseded views and repeated runs first and keeps the
    latest views of the files being worked on longest. From the environment:
    ``CTXWISE_TOOL_RULES`` as a JSON object. Raises PolicyError for an empty tool name or a
    rule not of that shape."""
    shrink_calls: int = Field(15, ge=0, le=1_000)
    """When the context must shrink inside a turn (a last-resort clearing of a tool loop), it
    frees room for this many more calls at the rate the context has grown so far (a low
    watermark), in one batch ranked by expected re-use, so one prompt-cache break buys many
    calls. 0: free everything the current turn's completed cycles hold."""
    clear_errors: bool = False
    """Clear failed results too (off: an "order not found" stops the model repeating the call)."""
    clear_tool_inputs: bool = False
    """Also replace large ``tool_use`` inputs of cleared cycles."""
    min_clear_chars: int = Field(200, ge=0)
    """Results shorter than this many characters are never cleared."""
    placeholder: str = DEFAULT_PLACEHOLDER
    """Template of a cleared body: ``{n}`` original characters, ``{name}``, ``{input}``, ``{id}``, ``{state}``,
    ``{values}`` (the body's key values: ids, amounts, dates, statuses, names; see ``placeholder_values_max``)."""
    placeholder_input: Literal["json", "kv"] = "json"
    """How ``{input}`` is written: compact JSON or Ragent's ``{key=value, ...}``."""
    placeholder_input_max: int = Field(120, ge=0)
    """``{input}`` is cut to this many characters."""
    placeholder_values_max: int = Field(170, ge=0)
    """``{values}`` keeps at most this many characters of key values (grouped by key:
    ``flight_number=HAT1, HAT2; date=...``), cut between whole values (0 = none). Each value
    kept may answer a later question without a recall, and is carried on every call. Values
    that name a record (ids, a list's items) go first, then states (``ctxwise.distill``)."""

    summarize: bool = True
    """Whether the summarizing stage runs at all."""
    summary_target: float = Field(0.09, gt=0, le=1)
    """Size to aim a summary at, as a share of the effective budget (at least 200 characters;
    the digest keeps the user's requirements verbatim beyond it, up to 2,000 characters). A
    summary is re-billed whole on the call that writes it and carried on every call after."""
    summary_rollup_share: float = Field(0.2, gt=0, le=1)
    """A new summary pass appends a segment after the earlier ones (their text stays
    byte-identical, so the prompt cache keeps them); when the segments together would grow
    past this share of the budget, they are rolled into one summary instead."""
    summary_keep_recent: float = Field(0.1, ge=0, le=1)
    """Recent turns kept verbatim after a summary cut, as a fraction of the effective budget
    (what the summary keeps verbatim is re-billed with it on the call it fires)."""
    summary_min_material: float = Field(0.5, ge=0, le=1)
    """Skip summarizing when the material is under this share of the compactable context."""

    facts: bool = True
    """Pin the user's own facts (ids, amounts, dates, constraints) in a block of their own."""
    facts_share: float = Field(0.08, ge=0, le=0.5)
    """The facts block's share of the budget; the oldest lines go first when it is full."""
    facts_mode: Literal["when_compacted", "always"] = "when_compacted"
    """When the pinned facts block is sent: once a summary or trim has removed user turns
    (before that every fact is in the context verbatim), or on every call."""
    user_memory: bool = True
    """Keep long-term memory of a user across sessions and send it at the start of new ones."""
    user_memory_share: float = Field(0.04, ge=0, le=0.5)
    """The user-memory block's share of the budget."""

    provider: str = "openai"
    """The provider profile every payload must satisfy (see ``ctxwise.providers``)."""
    native_system: bool = False
    """``provider="anthropic"`` only: send a system message after the leading ones (a reminder,
    a mode switch) as a ``{"role": "system", "content"}`` message among ``messages``, the form
    the standard Messages API takes (anthropic 2.17 ``types/message_param.py``: ``MessageParam``
    includes ``SystemMessageParam``; no beta header) on models that accept mid-conversation
    system messages (Claude Opus 4.8 and later,
    https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-8), placed right
    after a user turn. Off (the default, as every Claude model takes it): its text is folded
    into the user turn at its place (``system-not-first`` conversion)."""
    bound_reasoning: Literal["auto", "on", "off"] = "auto"
    """Whether the provider binds reasoning to its prefix (a reasoning block is valid only while
    everything sent before it is unchanged): ``auto`` = the profile's own (on for ``anthropic``,
    Claude 5.x preserved thinking; for ``openai_responses`` on when ``price_model`` names the
    gpt-5.6 family, ``openai_gpt56`` / ``openai_gpt56_12h``, whose ``reasoning.context``
    defaults to ``all_turns``, else off: earlier models default to ``current_turn``;
    ``openai/types/shared/reasoning.py``), ``on`` (Responses with
    ``reasoning.context="all_turns"`` on a model ctxwise is not told of), ``off`` (older
    Claude models; Responses with ``current_turn``).
    When on, edits are placed so that no retained bound reasoning follows them, or that
    reasoning is dropped with an event (``ctxwise.providers.bound_profile``)."""

    loop_keep_recent: float = Field(0.6, gt=0, le=1)
    """When an open tool loop whose reasoning is bound to its prefix (``bound_reasoning``, a
    profile that refuses a changed prefix) no longer fits, the loop is closed: its older cycles
    are cleared or summarized, its reasoning after the first edit is dropped (an event with
    its tokens), and a ctxwise note (a user turn) ends it, so the replies after it think on a
    prefix that stays unchanged. This fraction of the effective budget is what that close keeps
    of the context (system, task and latest cycles); the rest is room for the next calls."""

    price_model: str | None = None
    """The prompt-cache price model edits are weighed with (``ctxwise.prices``): a provider
    name, ``flat``, or a model named for a cache lifetime or model family (``anthropic_1h``:
    2x write, kept 1 h; ``openai_gpt56`` / ``openai_gpt56_12h``: gpt-5.6's 1.25x write, kept 30
    min / 12 h); None = the ``provider``'s own (Anthropic 1.25x write / 0.1x read, kept 5 min;
    DeepSeek hits at 2 % of a miss, ...; sources in ``ctxwise.prices``). A model's lifetime
    decides when the cache is cold and an edit free (``Session.prepare(now=...)``)."""
    cache_read_price: float | None = Field(None, ge=0)
    """Override: a cached (hit) input token's price, as a multiple of an uncached one."""
    cache_write_price: float | None = Field(None, ge=0)
    """Override: the price of an input token written to the cache (1.0 = no write premium)."""
    cache_miss_price: float | None = Field(None, ge=0)
    """Override: the price of an input token of a prompt too short to be cached (normally 1.0)."""
    cache_min_prefix: int | None = Field(None, ge=0)
    """Override: the shortest cacheable prefix, in tokens (Anthropic Sonnet and OpenAI: 1,024)."""

    def __init__(self, /, **data: Any) -> None:
        """Validate ``data``; :class:`PolicyError` names the first bad or unknown field."""
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _policy_error(e) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> "Policy":
        """Like pydantic's, raising :class:`PolicyError` (naming the field) instead of ValidationError."""
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as e:
            raise _policy_error(e) from None

    @model_validator(mode="after")
    def _check(self) -> "Policy":
        if not (self.clear_at <= self.summarize_at <= self.hard_limit):
            raise ValueError(
                f"watermarks must satisfy clear_at <= summarize_at <= hard_limit, got "
                f"{self.clear_at}, {self.summarize_at}, {self.hard_limit}"
            )
        if self.trim_target is not None and self.trim_target > self.hard_limit:
            raise ValueError(f"trim_target {self.trim_target} must not exceed hard_limit {self.hard_limit}")
        if self.clear_target > self.clear_at:
            raise ValueError(f"clear_target {self.clear_target} must not exceed clear_at {self.clear_at}")
        if self.reserve_output >= self.budget:
            raise ValueError(f"reserve_output {self.reserve_output} leaves no room in budget {self.budget}")
        if self.provider not in PROVIDERS:
            raise ValueError(f"unknown provider {self.provider!r}; known: {', '.join(PROVIDERS)}")
        if self.native_system and self.provider != "anthropic":
            raise ValueError(f"native_system is an Anthropic setting (role \"system\" messages in `messages`); "
                             f"provider {self.provider!r} has its own rule for later system messages")
        if self.price_model is not None and self.price_model not in PRICE_MODELS:
            raise ValueError(f"unknown price_model {self.price_model!r}; known: {', '.join(PRICE_MODELS)}")
        return self

    @field_validator("tool_rules", mode="before")
    @classmethod
    def _tool_rules_shape(cls, rules: Any) -> Any:
        """A map of tool name to rule; anything else is refused with the expected shape."""
        if not isinstance(rules, Mapping):
            raise ValueError(f"expected a map of tool name to rule, {TOOL_RULES_SHAPE}; got {type(rules).__name__} {rules!r:.80}")
        for tool, rule in rules.items():
            if not isinstance(rule, str):
                raise ValueError(f"tool rule {tool!r}: expected a string rule, {TOOL_RULES_SHAPE}; got {rule!r:.80}")
        return rules

    @field_validator("tool_rules")
    @classmethod
    def _tool_rules(cls, rules: dict[str, str]) -> dict[str, str]:
        """Each key a tool name (not empty), each rule ``argument``, ``argument:action`` or ``""``."""
        for tool, rule in rules.items():
            if not tool.strip():
                raise ValueError(f"tool rule {tool!r}: {rule!r}: the tool name is empty; {TOOL_RULES_SHAPE}")
            arg, _, action = rule.partition(":")
            if rule and (not arg or (action or "view") not in ("view", "edit", "search", "run")):
                raise ValueError(f"tool rule {tool!r}: {rule!r} must be 'argument' or 'argument:action' "
                                 "(action view, edit, search or run), or '' for no key")
        return rules

    @field_validator("placeholder")
    @classmethod
    def _placeholder_template(cls, template: str) -> str:
        """A template that renders: only the named fields, and some text of its own (an empty
        tool result is refused by providers: Anthropic, cases invariant 9)."""
        fields = "{n}, {name}, {input}, {id}, {state}, {values}"
        known = ("n", "name", "input", "id", "state", "values")
        try:
            # a field is one of the names, as is: no attribute or index ({name.upper} would
            # render a Python repr into the payload, {name[0]} a letter)
            for _, field, _, _ in string.Formatter().parse(template):
                if field and not field.isdigit() and field not in known:  # "{}" / "{0}": format refuses
                    raise KeyError(field)
            text = template.format(n=0, name="t", input="{}", id="call_0", state="success", values="")
        except KeyError as e:
            raise ValueError(f"unknown field {{{e.args[0]}}} in the template; known: {fields}") from None
        except (ValueError, IndexError) as e:
            raise ValueError(f"not a template ({e}); fields are written {fields}, a literal brace doubled") from None
        if not text.strip():
            raise ValueError("the template renders empty text; a placeholder must say the result was cleared")
        return template

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, name: str) -> str:
        from .tokens import list_counters  # the names only: no vocabulary is loaded here

        known = [n for n in list_counters() if n != "chars"]
        if name not in known:
            raise ValueError(f"unknown tokenizer {name!r} (checked whatever the unit); known: {', '.join(known)}")
        return name

    # -- derived -----------------------------------------------------------------------

    @property
    def profile(self) -> ProviderProfile:
        """The provider profile in force: ``provider``'s with ``bound_reasoning`` applied
        (:func:`ctxwise.providers.bound_profile`), ``mid_system="native"`` under
        ``native_system``, and, for OpenAI under a price model with
        explicit cache breakpoints (the gpt-5.6 family), ``cache_breakpoints`` on
        (:func:`ctxwise.providers.profiles.cache_breakpoint_profile`)."""
        profile = bound_profile(self.provider, self.bound_reasoning,
                                all_turns=self.price_model in ALL_TURNS_PRICE_MODELS)
        if self.native_system:
            profile = replace(profile, mid_system="native")
        if profile.name not in BREAKPOINT_TARGETS:
            return profile
        return cache_breakpoint_profile(profile, self.prices.breakpoints)

    @property
    def effective_budget(self) -> int:
        """``budget - reserve_output``, in the policy unit."""
        return self.budget - self.reserve_output

    @property
    def counter_name(self) -> str:
        """The counter that measures this policy's unit."""
        return "chars" if self.unit == "chars" else self.tokenizer

    def level(self, fraction: float) -> int:
        """A watermark as a size in the policy unit (rounded down)."""
        return int(self.effective_budget * fraction)

    @property
    def prices(self) -> PriceModel:
        """The prompt-cache price model in force: ``price_model`` (else the provider's default
        from :data:`ctxwise.prices.PRICE_MODELS`) with the ``cache_*`` overrides applied.
        Prices are multiples of an uncached input token; ``min_prefix`` is in tokens."""
        base = PRICE_MODELS[self.price_model or self.provider]
        over: dict[str, Any] = {k: v for k, v in (("read", self.cache_read_price), ("write", self.cache_write_price),
                                                  ("miss", self.cache_miss_price), ("min_prefix", self.cache_min_prefix))
                                if v is not None}
        return replace(base, name=f"{base.name} (policy overrides)", **over) if over else base

    def clearable(self, tool_name: str | None) -> bool:
        """Whether results of ``tool_name`` may be cleared (allow-list, then keep list)."""
        name = tool_name or ""
        if name in self.keep_tools:
            return False
        return "*" in self.clearable_tools or name in self.clearable_tools

    def with_(self, **update: Any) -> "Policy":
        """A validated copy with ``update`` applied; :class:`PolicyError` on a bad value. The
        copy's ``model_fields_set`` is this policy's plus the keys of ``update``."""
        return _build({**self.model_dump(include=set(self.model_fields_set)), **update})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> "Policy":
        """A copy; with ``update`` it is validated like :meth:`with_` (PolicyError on a bad value)."""
        return self.with_(**update) if update else super().model_copy(deep=deep)

    # -- constructors ------------------------------------------------------------------

    @classmethod
    def preset(cls, name: str, **update: Any) -> "Policy":
        """A named preset (``default``, ``lean``, ``ragent``) with optional overrides."""
        try:
            base = PRESETS[name]
        except KeyError:
            raise PolicyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
        return _build({**base, **update})

    @classmethod
    def from_toml(cls, path: str | Path, *, default_preset: str = "default", **update: Any) -> "Policy":
        """Load from a TOML file: keys at top level or in a ``[ctxwise]`` table; an optional
        ``preset = "ragent"`` key picks the base (else ``default_preset``). The process settings
        (:data:`RUNTIME_FIELDS`) are left to :meth:`RuntimeSettings.from_toml`, a top-level
        ``[proxy]`` table to the drop-in endpoint (``ctxwise.proxy.routes.Upstreams``). Raises
        PolicyError naming the file and the key."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise PolicyError(f"{p}: cannot read policy file ({e.strerror})") from None
        except tomllib.TOMLDecodeError as e:
            raise PolicyError(f"{p}: not valid TOML ({e})") from None
        data = {k: v for k, v in data.get("ctxwise", data).items() if k not in RUNTIME_FIELDS and k != "proxy"}
        preset = data.pop("preset", default_preset)
        try:
            policy = cls.preset(preset, **{**data, **update})
            if policy.unit == "tokens":
                from .tokens import get_counter

                get_counter(policy.tokenizer)
            return policy
        except PolicyError as e:
            raise PolicyError(f"{p}: {e}") from None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **update: Any) -> "Policy":
        """Load from ``CTXWISE_*`` variables (``CTXWISE_PRESET``, ``CTXWISE_BUDGET``, ...).
        List values are comma-separated, a map (``CTXWISE_TOOL_RULES``) is a JSON object
        (``{"open_file": "path", "run": "cmd:run"}``); the process settings (``CTXWISE_SUMMARIZER_MODEL``, ...)
        are left to :meth:`RuntimeSettings.from_env`. Raises PolicyError naming the variable, also
        for a ``CTXWISE_`` variable that is no setting (a typo like ``CTXWISE_BUGDET``)."""
        env = os.environ if environ is None else environ
        data: dict[str, Any] = {}
        for var, raw in env.items():
            if not var.startswith("CTXWISE_") or var in NOT_POLICY_VARIABLES or var.startswith("CTXWISE_SERVER_"):
                continue
            key = var.removeprefix("CTXWISE_").lower()
            if key in RUNTIME_FIELDS:  # RuntimeSettings.from_env reads them
                continue
            field = cls.model_fields.get(key)
            if field is None:
                known = [*cls.model_fields, *RUNTIME_FIELDS]
                raise PolicyError(f"{var}: unknown setting (known: {', '.join('CTXWISE_' + k.upper() for k in known)})")
            if field.annotation == dict[str, str]:  # a map: a JSON object
                data[key] = _json_map(var, raw)
                continue
            data[key] = [s.strip() for s in raw.split(",") if s.strip()] if field.annotation == list[str] else raw
        preset = env.get("CTXWISE_PRESET", "default")
        try:
            return cls.preset(preset, **{**data, **update})
        except PolicyError as e:
            key = str(e).split(":", 1)[0].removeprefix("policy ").strip()
            var = f"CTXWISE_{key.upper()}" if key in cls.model_fields else "CTXWISE_*"
            raise PolicyError(f"{var}: {e}") from None

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any], provider: str | None = None) -> "Policy":
        """The policy a store holds for a session (``SessionState.policy``): the fields of this
        version are read as stored, a key this version does not know (a process setting an
        older version persisted, such as ``summarizer_timeout_s``) is ignored, and ``provider``
        (the store's column) fills a missing ``provider``. A field the stored dict lacks takes
        today's default. Raises PolicyError when a stored value no longer validates."""
        data = {k: v for k, v in stored.items() if k in cls.model_fields}
        if provider is not None:
            data.setdefault("provider", provider)
        return cls.model_validate(data)

    def session_settings(self, *, only_set: bool = False) -> dict[str, Any]:
        """The settings as JSON values, ``{field: value}`` (what a store persists). With
        ``only_set``, only the fields the caller gave (``model_fields_set``: keyword arguments,
        the preset's own keys, TOML or environment keys), the ones compared on reopen."""
        return self.model_dump(mode="json", include=set(self.model_fields_set) if only_set else None)


def setting_name(field: str) -> str:
    """A field's grouped name, ``stage.field`` (``clearing.clear_at``), as errors and the README
    name it; a name that is no Policy field is returned as it is."""
    return f"{GROUP_OF[field]}.{field}" if field in GROUP_OF else field


TOOL_RULES_SHAPE = '{"tool name": "argument" or "argument:action" (action view, edit, search or run) or "" (no key)}'
"""The shape ``Policy.tool_rules`` takes, as errors name it."""


def _json_map(var: str, raw: str) -> dict[str, Any]:
    """A ``CTXWISE_*`` map setting's JSON object; PolicyError naming ``var`` and the shape."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise PolicyError(f"{var}: not JSON ({e.msg} at character {e.pos}); expected a JSON object "
                          f"{TOOL_RULES_SHAPE}") from None
    if not isinstance(value, dict):
        raise PolicyError(f"{var}: expected a JSON object {TOOL_RULES_SHAPE}; got a JSON {type(value).__name__}")
    return value


NOT_POLICY_VARIABLES = frozenset({"CTXWISE_PRESET", "CTXWISE_SHARED", "CTXWISE_TEST_PG_URL", "CTXWISE_SCREENSHOTS", "CTXWISE_DB",
                                  "CTXWISE_CONFIG", "CTXWISE_OPENAI_UPSTREAM", "CTXWISE_ANTHROPIC_UPSTREAM",
                                  "CTXWISE_CLAUDE_CODE", "CTXWISE_CODEX", "CTXWISE_OPENCODE"})
"""``CTXWISE_`` variables that are not policy settings (the preset, test and tool settings, the
policy file ``ctxwise serve`` reads, the drop-in endpoint's upstreams, the Claude Code,
Codex and OpenCode CLIs the proxy tests run); ``CTXWISE_SERVER_*`` are the server's own settings."""


def _build(data: dict[str, Any]) -> Policy:
    return Policy.model_validate(data)


RETIRED_SETTINGS: dict[str, str] = {
    "edit_horizon": "the calls an early edit had to pay back within; with edit_when=\"pays\" nothing is edited under "
                    "the hard limit while the prompt cache is warm, so there is no early edit to weigh",
}
"""Settings an older version had, with what became of them: ``Policy(...)`` refuses them with
that reason; a stored session's policy that holds one reopens without it (:meth:`Policy.from_stored`)."""


def _policy_error(e: ValidationError) -> PolicyError:
    """The first problem of ``e`` as a one-line PolicyError naming the field (a process
    setting or a retired one before an unknown one)."""
    errors = e.errors()
    err = next((x for x in errors if x.get("type") == "extra_forbidden"
                and ".".join(str(k) for k in x.get("loc", ())) in RUNTIME_FIELDS), errors[0])
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, PolicyError):  # raised by Policy.__init__ inside model_validate
        return inner
    where = ".".join(str(x) for x in err.get("loc", ()))
    msg = str(err.get("msg", "")).removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden" and where in RUNTIME_FIELDS:
        return PolicyError(f"policy {where}: a process setting, not a session setting",
                           hint=f"pass RuntimeSettings({where}=...) as ContextManager(runtime=...), or set it on "
                                "the summarizer instance; TOML files and CTXWISE_* variables route it there")
    if err.get("type") == "extra_forbidden" and where in RETIRED_SETTINGS:
        return PolicyError(f"policy {where}: a retired setting ({RETIRED_SETTINGS[where]})",
                           hint=f"remove {where}; sessions stored with it reopen without it")
    if err.get("type") == "extra_forbidden":
        near = difflib.get_close_matches(where, list(Policy.model_fields), n=1)
        guess = f"did you mean {near[0]!r}? " if near else ""
        msg = f"unknown setting ({guess}known: {', '.join(Policy.model_fields)})"
    return PolicyError(f"policy {where}: {msg}" if where else f"policy: {msg}")


PRESETS: dict[str, dict[str, Any]] = {
    "default": {"name": "default"},
    # Fewest tokens and cache breaks for small budgets: when something must go, every old turn
    # goes at once (whole turns, trim_target 0: only the current turn is left), so the next
    # calls append to an unchanged prefix instead of re-billing it on every call; no summary,
    # no clearing, no user-memory block (each adds a prefix change or tokens on every call);
    # the user's own facts stay pinned. Fewer values recalled than ``default``, for less
    # than trim_messages costs (bench/results/compare.md, 3,000 tokens).
    "lean": {
        "name": "lean",
        "summarize": False,
        "clearable_tools": [],
        "trim_target": 0.0,
        "user_memory": False,
    },
    "ragent": {
        "name": "ragent",
        "budget": 100_000,
        "unit": "chars",
        "clear_at": 0.5,
        "edit_when": "watermark",
        "clear_target": 0.0,
        "summarize_at": 0.8,
        "hard_limit": 1.0,
        "keep_recent_cycles": 2,
        "clearable_tools": ["search_knowledge"],
        "clear_min_batch": 0.0,
        "min_clear_chars": 0,
        "placeholder": RAGENT_PLACEHOLDER,
        "placeholder_input": "kv",
        "placeholder_input_max": 120,
        "summary_target": 0.15,
        "summary_keep_recent": 0.2,
        "facts": False,
        "user_memory": False,
    },
}


SETTING_GROUPS: dict[str, tuple[str, ...]] = {
    "general": ("name", "enabled"),
    "context": ("budget", "unit", "tokenizer", "reserve_output", "count_system", "tools_size", "provider", "native_system",
                "bound_reasoning", "loop_keep_recent"),
    "edits": ("edit_when",),
    "clearing": ("clear_at", "clear_target", "clear_min_batch", "keep_recent_cycles", "protect_current_turn",
                 "clearable_tools", "keep_tools", "tool_rules", "shrink_calls", "clear_errors", "clear_tool_inputs", "min_clear_chars",
                 "placeholder", "placeholder_input", "placeholder_input_max", "placeholder_values_max"),
    "summarizing": ("summarize", "summarize_at", "summary_target", "summary_rollup_share", "summary_keep_recent",
                    "summary_min_material"),
    "trimming": ("hard_limit", "trim_target", "truncate_in_flight"),
    "facts": ("facts", "facts_share", "facts_mode"),
    "memory": ("user_memory", "user_memory_share"),
    "prices": ("price_model", "cache_read_price", "cache_write_price", "cache_miss_price", "cache_min_prefix"),
}
"""The session settings (every :class:`Policy` field, each in one group) by stage: ``general``
(label, on/off), ``context`` (what is measured and for which provider), ``edits`` (when optional
edits fire), ``clearing``, ``summarizing``, ``trimming``, ``facts`` (the pinned facts block),
``memory`` (long-term user memory), ``prices`` (the prompt-cache price model). Errors and the
README name a field ``group.field`` (:func:`setting_name`); code reads it flat (``policy.clear_at``)."""

GROUP_OF: dict[str, str] = {f: g for g, fields in SETTING_GROUPS.items() for f in fields}
"""``{field: group}`` for every Policy field."""


class RuntimeSettings(BaseModel):
    """How this process runs, apart from what defines a session (:class:`Policy`): the
    summarizer :class:`~ctxwise.ContextManager` builds when it is given none. Never stored with
    a session and never compared when one is reopened, so changing one never raises
    :class:`~ctxwise.errors.PolicyMismatch`. Frozen. Read from code, the same TOML file as the
    policy (:meth:`from_toml`) or the same ``CTXWISE_*`` variables (:meth:`from_env`). Raises
    :class:`~ctxwise.errors.PolicyError` naming the field for a bad or unknown value.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    summarizer: Literal["digest", "openai"] = "digest"
    """``digest`` (offline, deterministic) or ``openai`` (any OpenAI-compatible endpoint)."""
    summarizer_model: str = "gpt-4.1-mini"
    """Model name for the ``openai`` summarizer."""
    summarizer_base_url: str | None = None
    """Endpoint for the ``openai`` summarizer (None: ``OPENAI_BASE_URL``)."""
    summarizer_timeout_s: float = Field(20.0, gt=0)
    """Seconds one summary request may take before it counts as failed."""
    summarizer_max_retries: int = Field(1, ge=0, le=5)
    """Retries after a failed summary request."""

    def __init__(self, /, **data: Any) -> None:
        """Validate ``data``; :class:`PolicyError` names the first bad or unknown field."""
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _runtime_error(e) from None

    def make_summarizer(self) -> Summarizer:
        """The summarizer these settings name: a new
        :class:`~ctxwise.summarizers.DigestSummarizer` for ``digest``, a new
        :class:`~ctxwise.summarizers.openai.OpenAISummarizer` with this model, endpoint, timeout
        and retries for ``openai`` (raises :class:`~ctxwise.errors.MissingExtra` without the
        ``llm`` extra)."""
        from .summarizers import from_settings

        return from_settings(self)

    @classmethod
    def from_toml(cls, path: str | Path, **update: Any) -> "RuntimeSettings":
        """The process settings of a policy TOML file (top level or ``[ctxwise]`` table): its
        keys named in :data:`RUNTIME_FIELDS`; the others are the policy's
        (:meth:`Policy.from_toml`). Raises PolicyError naming the file and the key."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise PolicyError(f"{p}: cannot read policy file ({e.strerror})") from None
        except tomllib.TOMLDecodeError as e:
            raise PolicyError(f"{p}: not valid TOML ({e})") from None
        table = data.get("ctxwise", data)
        try:
            return cls(**{**{k: v for k, v in table.items() if k in RUNTIME_FIELDS}, **update})
        except PolicyError as e:
            raise PolicyError(f"{p}: {e}", hint=e.hint) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **update: Any) -> "RuntimeSettings":
        """The process settings among ``CTXWISE_*`` variables (``CTXWISE_SUMMARIZER``,
        ``CTXWISE_SUMMARIZER_MODEL``, ``CTXWISE_SUMMARIZER_BASE_URL``,
        ``CTXWISE_SUMMARIZER_TIMEOUT_S``, ``CTXWISE_SUMMARIZER_MAX_RETRIES``); the others are the
        policy's (:meth:`Policy.from_env`). Raises PolicyError naming the variable."""
        env = os.environ if environ is None else environ
        data = {k: env[f"CTXWISE_{k.upper()}"] for k in RUNTIME_FIELDS if f"CTXWISE_{k.upper()}" in env}
        try:
            return cls(**{**data, **update})
        except PolicyError as e:
            key = str(e).split(":", 1)[0].removeprefix("runtime ").strip()
            var = f"CTXWISE_{key.upper()}" if key in RUNTIME_FIELDS else "CTXWISE_*"
            raise PolicyError(f"{var}: {e}", hint=e.hint) from None


RUNTIME_FIELDS: tuple[str, ...] = tuple(RuntimeSettings.model_fields)
"""The process settings (:class:`RuntimeSettings` fields): accepted in a policy TOML file and as
``CTXWISE_*`` variables, refused by ``Policy(...)``, ignored in a stored policy."""


def _runtime_error(e: ValidationError) -> PolicyError:
    """The first problem of ``e`` as a one-line PolicyError naming the runtime field."""
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()))
    msg = str(err.get("msg", "")).removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden" and where in Policy.model_fields:
        return PolicyError(f"runtime {where}: a session setting, not a process setting",
                           hint=f"set it on the Policy (Policy({where}=...)); it is stored with each session")
    if err.get("type") == "extra_forbidden":
        msg = f"unknown setting (known: {', '.join(RUNTIME_FIELDS)})"
    return PolicyError(f"runtime {where}: {msg}" if where else f"runtime: {msg}")


def _normalized(policy: Mapping[str, Any], provider: str | None = None) -> dict[str, Any]:
    """A stored policy as JSON values: its fields as stored, today's defaults for the ones it
    lacks, no process settings (raw, minus the process settings, when it no longer validates)."""
    try:
        return Policy.from_stored(policy, provider).session_settings()
    except PolicyError:  # a policy stored by another version: compare as stored
        raw = {k: v for k, v in policy.items() if k not in RUNTIME_FIELDS}
        if provider is not None:
            raw.setdefault("provider", provider)
        return raw


def stored_policy(stored: Mapping[str, Any], provider: str, fallback: Policy) -> Policy:
    """The policy a session was stored with (its stored JSON and provider), process settings
    ignored; ``fallback`` when it no longer validates."""
    try:
        return Policy.from_stored(stored, provider)
    except PolicyError:
        return fallback


def policy_diff(stored: Mapping[str, Any], provider: str, given: Policy) -> dict[str, tuple[Any, Any]]:
    """``{field: (stored, given)}`` for every field ``given`` sets (its ``model_fields_set``)
    whose value differs from the stored one; fields it leaves unset are not compared, nor are
    process settings."""
    old, new = _normalized(stored, provider), given.session_settings(only_set=True)
    return {k: (old.get(k), new[k]) for k in sorted(new) if old.get(k) != new[k]}
