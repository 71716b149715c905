"""Policy: presets, TOML, environment, and errors that name the setting."""

from __future__ import annotations

import re

import pytest

from ctxwise.errors import PolicyError
from ctxwise.policy import Policy


def test_presets_and_validated_copies():
    assert Policy.preset("ragent").budget == 100_000 and Policy.preset("ragent").clearable_tools == ["search_knowledge"]
    p = Policy.preset("default").model_copy(update={"budget": 4000, "unit": "tokens"})
    assert (p.budget, p.unit) == (4000, "tokens")
    with pytest.raises(PolicyError, match="unit"):
        Policy.preset("default").model_copy(update={"unit": "bogus"})
    with pytest.raises(PolicyError, match="watermarks"):
        Policy.preset("default", clear_at=0.9, summarize_at=0.5)
    with pytest.raises(PolicyError, match="unknown preset"):
        Policy.preset("nope")
    assert all(f.description for f in Policy.model_fields.values()), "every setting is described"


def test_from_env_names_the_variable_and_refuses_typos():
    p = Policy.from_env({"CTXWISE_BUDGET": "4000", "CTXWISE_UNIT": "tokens", "CTXWISE_KEEP_TOOLS": "a, b",
                         "CTXWISE_SHARED": "/elsewhere"})
    assert (p.budget, p.unit, p.keep_tools) == (4000, "tokens", ["a", "b"])
    with pytest.raises(PolicyError, match="CTXWISE_BUDGET"):
        Policy.from_env({"CTXWISE_BUDGET": "abc"})
    with pytest.raises(PolicyError, match="CTXWISE_BUGDET: unknown setting"):
        Policy.from_env({"CTXWISE_BUGDET": "1"})
    assert Policy.from_env({"CTXWISE_PRESET": "ragent"}).name == "ragent"


def test_from_toml_names_the_file(tmp_path):
    good = tmp_path / "p.toml"
    good.write_text('[ctxwise]\npreset = "ragent"\nbudget = 5000\n')
    assert (Policy.from_toml(good).name, Policy.from_toml(good).budget) == ("ragent", 5000)
    bad = tmp_path / "bad.toml"
    bad.write_text("[ctxwise]\nbudgt = 5\n")
    with pytest.raises(PolicyError, match=r"bad.toml: policy budgt: unknown setting"):
        Policy.from_toml(bad)
    with pytest.raises(PolicyError, match="not valid TOML"):
        (tmp_path / "x.toml").write_text("= =")
        Policy.from_toml(tmp_path / "x.toml")


def test_a_hard_limit_above_the_budget_is_refused():
    """Kind: a watermark that lets prepare() send more than the budget (hard_limit 2.0 sent
    5,778 tokens against 3,000, silently)."""
    for bad in (1.01, 2.0):
        with pytest.raises(PolicyError, match="hard_limit"):
            Policy.preset("default", budget=3000, unit="tokens", summarize_at=0.9, hard_limit=bad)
    assert Policy.preset("default", hard_limit=1.0).hard_limit == 1.0


def test_the_budget_error_names_the_hard_limit_it_applied():
    """Kind: ContextBudgetExceeded naming the budget when the limit applied was a lower hard limit."""
    from ctxwise import ContextManager, InMemoryStore
    from ctxwise.errors import ContextBudgetExceeded

    cm = ContextManager(InMemoryStore(), Policy.preset("default", budget=3000, unit="chars", clear_at=0.002, clear_target=0.001,
                                                       summarize_at=0.005, hard_limit=0.01))
    s = cm.session("u", "s")
    s.append_openai([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x" * 100}])
    with pytest.raises(ContextBudgetExceeded) as e:
        s.prepare()
    assert "the budget 3000 chars (its hard limit 30 chars)" in str(e.value)


@pytest.mark.parametrize("template,says", [("{nope}", "unknown field {nope}"), ("[cleared {values", "not a template"),
                                           ("{0}", "not a template"), ("", "renders empty"), ("  ", "renders empty"),
                                           # attribute or index access renders a Python repr or one letter
                                           ("[{name.upper} cleared]", "unknown field {name.upper}"),
                                           ("[{name[0]} cleared]", "unknown field {name[0]}")])
def test_a_placeholder_template_that_cannot_render_is_refused_when_the_policy_is_made(template, says):
    """Kind: a placeholder template with a field the placeholder does not have, a broken
    brace, or no text: refused at once naming the field, not a KeyError (or an empty tool
    result the provider refuses) at the first clearing, calls later."""
    with pytest.raises(PolicyError, match=r"policy placeholder: .*" + re.escape(says)):
        Policy.preset("default", placeholder=template)
    assert Policy.preset("default", placeholder="[cleared {{raw}} {name}: {id}]").placeholder  # doubled braces are text


def test_the_screenshot_switch_of_the_inspector_tests_is_not_a_policy_setting():
    """``CTXWISE_SCREENSHOTS=docs`` (how docs/inspector-*.png are made) used to be refused as an
    unknown policy setting by every server the Chromium tests start."""
    assert Policy.from_env({"CTXWISE_SCREENSHOTS": "docs", "CTXWISE_BUDGET": "5000"}).budget == 5000
    with pytest.raises(PolicyError, match="CTXWISE_SCREENSHOT"):
        Policy.from_env({"CTXWISE_SCREENSHOT": "docs"})
