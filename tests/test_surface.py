"""The surface a user meets first: errors that are ctxwise's and say what to do, a policy
checked when it is built, the CLI options that depend on each other, `with ContextManager`."""

from __future__ import annotations

import inspect
import json
import traceback

import pytest
from typer.testing import CliRunner

import ctxwise.errors as errors_module
from ctxwise import ContextManager, Policy
from ctxwise.cli import app
from ctxwise.errors import CtxwiseError, FormatError, PolicyError, with_hint
from tests.conftest import TRAJECTORIES

RETAIL = TRAJECTORIES / "tau2-bench" / "retail_gpt-4.1_1trial.json"


def error_classes() -> list[type[CtxwiseError]]:
    return [c for _, c in inspect.getmembers(errors_module, inspect.isclass)
            if issubclass(c, CtxwiseError) and c.__module__ == errors_module.__name__]


# -- every error says what to do ------------------------------------------------------------


def test_every_error_class_in_errors_py_has_its_own_hint():
    """Kind: an error that says what went wrong but not what to do. Each class defines a hint
    of its own (not only the base class's generic one)."""
    classes = error_classes()
    assert len(classes) >= 10, classes
    generic = CtxwiseError.hint
    missing = [c.__name__ for c in classes if c is not CtxwiseError and (not c.hint or c.hint == generic)]
    assert not missing, f"errors without a hint of their own: {missing}"


def test_ctxwise_errors_raised_elsewhere_live_in_errors_py():
    """Kind: an error class defined in some module, out of reach of `from ctxwise.errors import`."""
    import pkgutil
    import importlib

    import ctxwise

    stray = []
    for mod in pkgutil.walk_packages(ctxwise.__path__, "ctxwise."):
        if mod.name.startswith(("ctxwise.migrations", "ctxwise.cli", "ctxwise.server", "ctxwise.integrations")):
            continue
        try:
            m = importlib.import_module(mod.name)
        except ImportError:  # an optional extra not installed here
            continue
        for _, c in inspect.getmembers(m, inspect.isclass):
            if issubclass(c, CtxwiseError) and c.__module__ == mod.name and mod.name != "ctxwise.errors":
                stray.append(f"{mod.name}.{c.__name__}")
    assert not stray, f"define these in ctxwise/errors.py (with a hint): {stray}"


def test_hint_is_shown_in_a_traceback_and_kept_out_of_str():
    try:
        raise FormatError("x.json: message 3", "no role")
    except FormatError as e:
        shown = "".join(traceback.format_exception(e))
        assert str(e) == "x.json: message 3: no role"
        assert f"hint: {FormatError.hint}" in shown
        assert with_hint(e) == f"x.json: message 3: no role (hint: {FormatError.hint})"
    e2 = FormatError("a", "b", hint="do this")
    assert e2.hint == "do this" and FormatError.hint != "do this"


# -- the policy is checked when it is built -------------------------------------------------


def test_policy_constructor_names_an_unknown_field_like_the_preset_path():
    """Kind: a typo in a setting reaching the user as a raw pydantic ValidationError."""
    with pytest.raises(PolicyError, match="policy budgte: unknown setting \\(did you mean 'budget'\\?"):
        Policy(budgte=1)
    with pytest.raises(PolicyError, match="policy budgte: unknown setting"):
        Policy.preset("default", budgte=1)
    with pytest.raises(PolicyError, match="policy budget: "):
        Policy.model_validate({"budget": 0})
    with pytest.raises(PolicyError, match="policy budget: "):
        Policy().with_(budget="many")


@pytest.mark.parametrize("unit", ["chars", "tokens"])
def test_unknown_tokenizer_is_refused_when_the_policy_is_built(unit):
    """Kind: a bad value accepted until first use (here: never, with unit='chars')."""
    with pytest.raises(PolicyError, match="policy tokenizer: unknown tokenizer 'gpt5'.*o200k_base"):
        Policy(unit=unit, tokenizer="gpt5")
    with pytest.raises(PolicyError, match="unknown tokenizer 'chars'"):
        Policy(unit="tokens", tokenizer="chars")  # a unit, not a tokenizer
    assert Policy(unit=unit, tokenizer="estimate").tokenizer == "estimate"


def test_env_names_the_variable_of_a_bad_tokenizer():
    with pytest.raises(PolicyError, match="CTXWISE_TOKENIZER"):
        Policy.from_env({"CTXWISE_TOKENIZER": "gtp"})


# -- the engine: a single message where a list is expected ----------------------------------


@pytest.fixture
def session(tmp_path):
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}") as cm:
        yield cm.session("u", "s")


def test_a_single_message_or_a_string_is_never_read_item_by_item(session):
    """Kind: a non-list argument iterated as if it were a list (``append_openai(dict)`` gave
    `ValueError: dictionary update sequence ...`, a string would give its characters). A single
    message is a list of one (the SDK reply object is passed straight on); a string is a
    FormatError naming the call; a batch that fails stores nothing."""
    with pytest.raises(FormatError, match="append_openai|messages: expected a list of messages, got str"):
        session.append_openai("hello")
    with pytest.raises(FormatError, match="append\\(\\): expected a list of messages, got str"):
        session.append("hello")
    with pytest.raises(FormatError, match="message 1: expected a message object, got int"):
        session.append_openai([{"role": "user", "content": "hi"}, 3])
    assert session.messages == [] and session.version == 0
    assert session.append_openai({"role": "user", "content": "hi"}) == 1
    assert session.append({"id": "m2", "role": "assistant", "blocks": [{"type": "text", "text": "hello"}]}) == 2
    assert [m.role for m in session.messages] == ["user", "assistant"]


def test_context_manager_closes_its_store_on_exit(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    closed = []
    with ContextManager(url) as cm:
        original = cm.store.close
        cm.store.close = lambda: (closed.append(True), original())  # type: ignore[method-assign]
        cm.session("u", "s").append_openai([{"role": "user", "content": "hi"}])
    assert closed == [True]
    with ContextManager(url) as cm:  # what was stored is there after the close
        assert [m.role for m in cm.session("u", "s").messages] == ["user"]


# -- the CLI --------------------------------------------------------------------------------


def test_tokenizer_option_implies_unit_tokens(tmp_path):
    """Kind: an option silently ignored because another was not given."""
    r = CliRunner().invoke(app, ["replay", str(RETAIL), "--limit", "1", "--no-baseline", "--tokenizer", "estimate",
                                 "--budget", "3000", "--db", f"sqlite:///{tmp_path / 'r.db'}"])
    assert r.exit_code == 0, r.output
    assert "budget 3,000 tokens (estimate)" in r.output
    r = CliRunner().invoke(app, ["replay", str(RETAIL), "--tokenizer", "estimate", "--unit", "chars"])
    assert r.exit_code == 2 and "error: --tokenizer counts tokens, but --unit chars" in r.output


def test_cli_prints_the_hint_on_the_error_line(tmp_path):
    r = CliRunner().invoke(app, ["replay", str(RETAIL), "--tokenizer", "gpt5"])
    assert r.exit_code == 2
    line = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "unknown tokenizer 'gpt5'" in line[0] and f"(hint: {PolicyError.hint})" in line[0]


# -- replay FILE with no options: settings from the recording ---------------------------------

CLAUDE = TRAJECTORIES / "tau2-bench" / "airline_claude-sonnet-4-5-thinking_subset.json"


@pytest.mark.parametrize("path, provider", [(CLAUDE, "anthropic"), (RETAIL, "openai")])
def test_replay_file_without_options_picks_the_recordings_provider_and_a_budget_that_acts(tmp_path, path, provider):
    """Kind: a default that does nothing or the wrong thing (100,000 chars never compacted a
    shipped recording; a Claude thinking recording ran as openai and lost its thinking)."""
    from ctxwise.formats import load
    from ctxwise.replay.defaults import recording_defaults

    r = CliRunner().invoke(app, ["replay", str(path), "--limit", "2", "--no-baseline", "--json",
                                 "--db", f"sqlite:///{tmp_path / 'r.db'}"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    expected = recording_defaults(load(path)[:2])
    assert doc["policy"]["provider"] == provider == expected.overrides["provider"]
    assert doc["policy"]["budget"] == expected.overrides["budget"] and doc["policy"]["unit"] == "tokens"
    assert f"provider {provider}: " in r.output and f"budget {expected.overrides['budget']:,} tokens: " in r.output
    events = sum(sum(s["measures"]["events"].values()) if isinstance(s["measures"]["events"], dict) else
                 len(s["measures"]["events"]) for s in doc["sessions"])
    assert events > 0, "the default budget must make compaction act"
    if provider == "anthropic":
        assert "thinking" in r.output and "kept" in r.output


def test_options_given_win_over_the_recording_defaults(tmp_path):
    r = CliRunner().invoke(app, ["replay", str(CLAUDE), "--limit", "1", "--no-baseline", "--json", "--budget", "9000",
                                 "--provider", "openai", "--db", f"sqlite:///{tmp_path / 'r.db'}"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["policy"]["provider"], doc["policy"]["budget"]) == ("openai", 9000)
    assert "defaults from the recording" not in r.output


def test_provider_guess_reads_the_reasoning_in_the_recording():
    from ctxwise.formats import load
    from ctxwise.replay.defaults import guess_provider
    from ctxwise.replay.sources import builtin

    assert guess_provider(load(CLAUDE)[:1])[0] == "anthropic"
    assert guess_provider(load(builtin("demo")))[0] == "deepseek"
    assert guess_provider(load(RETAIL)[:1])[0] == "openai"


def test_contextmanager_bad_store_url_and_policy_type_are_ctxwise_errors(tmp_path):
    """Kind: a user mistake at construction surfacing as another library's exception (a raw
    SQLAlchemy NoSuchModuleError for a URL scheme with no driver, an AttributeError for a dict
    policy). Now: StoreUnavailable naming the scheme with a hint; a mapping policy is validated
    as a Policy (a bad setting is a PolicyError); any other type is a PolicyError."""
    import pytest

    from ctxwise import ContextManager, Policy, PolicyError, StoreUnavailable

    with pytest.raises(StoreUnavailable, match="nope://"):
        ContextManager("nope://x")
    cm = ContextManager(f"sqlite:///{tmp_path / 'p.db'}", {"budget": 9000, "unit": "chars"})
    assert isinstance(cm.policy, Policy) and cm.policy.budget == 9000
    with pytest.raises(PolicyError, match="budgte"):
        ContextManager(f"sqlite:///{tmp_path / 'p.db'}", {"budgte": 1})
    with pytest.raises(PolicyError, match="got int"):
        ContextManager(f"sqlite:///{tmp_path / 'p.db'}", 5)  # type: ignore[arg-type]
