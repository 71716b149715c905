"""From what ``ctxwise replay`` was asked to the policy, process settings and recordings it runs.

:func:`plan_replay` turns a :class:`ReplayRequest` (the command line's options, None where not
given) into a :class:`ReplaySetup`:

* no path and no ``--config``: the built-in demo with :data:`~ctxwise.replay.run.DEMO_POLICY`
  under any option given (a ``--unit`` alone takes the preset's budget in that unit);
* paths: recordings are measured in tokens, so a ``--budget`` given alone counts tokens (the
  ``ragent`` preset counts characters, as the seeds' system does); a budget or provider left
  out is read from the recordings (:func:`~ctxwise.replay.defaults.recording_defaults`), and
  unless ``--provider`` (or the ``--config`` file) names one, each recording is replayed as the
  provider it was recorded with;
* ``--config FILE``: the policy and the process settings of the file, options on top.

Raises :class:`~ctxwise.errors.PolicyError` for a bad option (naming it) and
:class:`~ctxwise.errors.MissingExtra` for a tokenizer whose extra is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import Policy, PolicyError, RuntimeSettings, get_counter
from .defaults import recording_defaults
from .run import DEMO_POLICY
from .sources import SourceError, collect


@dataclass(frozen=True)
class ReplayRequest:
    """The options of one ``ctxwise replay`` (None: not given). ``unit`` is ``chars`` or
    ``tokens``, ``summarizer`` ``digest`` or ``openai``; ``limit`` caps the conversations."""

    paths: tuple[str, ...] = ()
    preset: str = "default"
    budget: int | None = None
    unit: str | None = None
    tokenizer: str | None = None
    provider: str | None = None
    config: Path | None = None
    summarizer: str | None = None
    limit: int | None = None


@dataclass
class ReplaySetup:
    """What to run: the ``policy``, the ``runtime`` process settings, the recordings when they
    were read already (``loaded``, as :func:`~ctxwise.replay.sources.collect` returns them),
    one ``notes`` line per setting read from the recordings, and how providers are chosen
    (``per_recording``, else all as ``policy.provider`` for ``provider_reason``)."""

    policy: Policy
    runtime: RuntimeSettings
    loaded: tuple[list[Any], list[SourceError]] | None = None
    notes: list[str] = field(default_factory=list)
    per_recording: bool = False
    provider_reason: str = ""


def _unit(req: ReplayRequest) -> str | None:
    """The unit asked for: a tokenizer implies tokens. Raises PolicyError when it was given
    with ``--unit chars``."""
    if req.tokenizer is not None and req.unit == "chars":
        raise PolicyError("--tokenizer counts tokens, but --unit chars was given", hint="drop one of them")
    return "tokens" if req.tokenizer is not None and req.unit is None else req.unit


def _overrides(req: ReplayRequest, unit: str | None) -> dict[str, Any]:
    """The policy fields the options set, with the demo's settings or the tokens unit of
    recordings filled in where they apply."""
    given = {"budget": req.budget, "unit": unit, "tokenizer": req.tokenizer, "provider": req.provider}
    overrides = {k: v for k, v in given.items() if v is not None}
    if not req.paths and req.config is None:
        demo = dict(DEMO_POLICY)
        if unit is not None and req.budget is None:
            demo.pop("budget")  # a unit alone: the preset's budget in that unit
        return {**demo, **overrides}
    if req.paths and req.config is None and unit is None and req.preset != "ragent":
        overrides.setdefault("unit", "tokens")
    return overrides


def _provider_reason(req: ReplayRequest, policy: Policy) -> tuple[bool, str]:
    """``(per_recording, reason)``: recordings choose their provider unless one was named."""
    if req.provider is not None:
        return False, f"--provider {req.provider}"
    if req.config is not None and "provider" in policy.model_fields_set:
        return False, f"the provider of {req.config}"
    if not req.paths:
        return False, "the demo is a DeepSeek thinking-mode session"
    return True, ""


def plan_replay(req: ReplayRequest) -> ReplaySetup:
    """The :class:`ReplaySetup` for ``req``. Options are checked before any file is read.
    Raises PolicyError (a bad option or config file) or MissingExtra (a tokenizer's extra)."""
    unit = _unit(req)
    overrides = _overrides(req, unit)
    process = {"summarizer": req.summarizer} if req.summarizer else {}
    loaded, notes = None, []
    if req.paths and req.config is None and (req.budget is None or req.provider is None):
        Policy.preset(req.preset, **overrides)  # the options given are checked before the files are read
        loaded = collect(req.paths)
        picked = recording_defaults(loaded[0][:req.limit] if req.limit else loaded[0], provider=req.provider,
                                    budget=req.budget, unit=unit or ("chars" if req.preset == "ragent" else "tokens"),
                                    tokenizer=req.tokenizer or "o200k_base")
        overrides, notes = {**picked.overrides, **overrides}, picked.notes
    if req.config is not None:
        policy = Policy.from_toml(req.config, default_preset=req.preset, **overrides)
        runtime = RuntimeSettings.from_toml(req.config, **process)
    else:
        policy, runtime = Policy.preset(req.preset, **overrides), RuntimeSettings(**process)
    if policy.unit == "tokens":
        get_counter(policy.tokenizer)  # an unknown tokenizer or a missing extra: before anything runs
    per_recording, reason = _provider_reason(req, policy)
    return ReplaySetup(policy, runtime, loaded, notes, per_recording, reason)
