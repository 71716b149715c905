"""Session settings apart from process settings (issue 24, item 2).

A :class:`Policy` defines a session's context: it is stored and, on reopen, the fields the caller
set are compared with the stored ones. :class:`RuntimeSettings` say how the process runs (the
summarizer, its model, timeout, retries): never stored, never compared. A session stored by an
older ctxwise (``tests/fixtures/old_session``) reopens with the README's own code."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from builders import system, user
from ctxwise import ContextManager, Policy, PolicyError, PolicyMismatch, RuntimeSettings
from ctxwise.policy import GROUP_OF, RUNTIME_FIELDS, SETTING_GROUPS, setting_name

FIXTURE = Path(__file__).parent / "fixtures" / "old_session" / "old_session.db"
POLICY = Policy(budget=5_000, unit="chars", provider="openai", keep_recent_cycles=3)


@pytest.fixture
def store(any_store):
    """Every backend: SqlStore on SQLite and PostgreSQL, InMemoryStore."""
    return any_store


def _stored_policy(store, session_id: str = "s") -> dict:
    return dict(store.load("u", session_id).policy)


# -- the two kinds of settings ------------------------------------------------------------------


def test_every_policy_field_is_in_one_stage_group_and_no_process_setting_is():
    grouped = [f for fields in SETTING_GROUPS.values() for f in fields]
    assert sorted(grouped) == sorted(Policy.model_fields), "each Policy field in exactly one group"
    assert not set(RUNTIME_FIELDS) & set(Policy.model_fields)
    assert setting_name("clear_at") == "clearing.clear_at" and GROUP_OF["summary_target"] == "summarizing"
    assert all(f.description for f in RuntimeSettings.model_fields.values()), "every process setting is described"


def test_a_process_setting_given_to_the_policy_is_refused_with_the_way_to_set_it():
    with pytest.raises(PolicyError, match="summarizer_timeout_s: a process setting") as e:
        Policy(budget=4_000, summarizer_timeout_s=30)
    assert "RuntimeSettings" in e.value.hint and "runtime=" in e.value.hint
    with pytest.raises(PolicyError, match="budget: a session setting") as e:
        RuntimeSettings(budget=4_000)
    assert "Policy(budget=...)" in e.value.hint
    with pytest.raises(PolicyError, match="summarizer_timeout_s"):
        RuntimeSettings(summarizer_timeout_s=0)


def test_toml_and_environment_route_each_setting_to_its_object(tmp_path):
    f = tmp_path / "ctxwise.toml"
    f.write_text('[ctxwise]\nbudget = 4000\nunit = "tokens"\nsummarizer = "openai"\nsummarizer_timeout_s = 30\n')
    policy, runtime = Policy.from_toml(f), RuntimeSettings.from_toml(f)
    assert (policy.budget, policy.unit) == (4000, "tokens") and "summarizer_timeout_s" not in policy.model_dump()
    assert (runtime.summarizer, runtime.summarizer_timeout_s) == ("openai", 30.0)
    env = {"CTXWISE_BUDGET": "4000", "CTXWISE_SUMMARIZER_MODEL": "m-1", "CTXWISE_SUMMARIZER_MAX_RETRIES": "3"}
    assert Policy.from_env(env).budget == 4000
    assert RuntimeSettings.from_env(env) == RuntimeSettings(summarizer_model="m-1", summarizer_max_retries=3)
    with pytest.raises(PolicyError, match="CTXWISE_SUMMARIZER_MAX_RETRIES"):
        RuntimeSettings.from_env({"CTXWISE_SUMMARIZER_MAX_RETRIES": "9"})
    with pytest.raises(PolicyError, match="CTXWISE_SUMMARIZR: unknown setting"):
        Policy.from_env({"CTXWISE_SUMMARIZR": "openai"})


def test_the_manager_builds_its_summarizer_from_the_process_settings(tmp_path):
    runtime = RuntimeSettings(summarizer="openai", summarizer_model="m-1", summarizer_timeout_s=7.5,
                              summarizer_max_retries=2, summarizer_base_url="http://127.0.0.1:9/v1")
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}", POLICY, runtime=runtime) as cm:
        assert cm.summarizer.name == "openai" and cm.summarizer.model == "m-1"
        client = cm.summarizer._client
        assert (client.timeout, client.max_retries, str(client.base_url)) == (7.5, 2, "http://127.0.0.1:9/v1/")
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}", POLICY) as cm:
        assert cm.summarizer.name == "digest"


def test_with_keeps_the_fields_the_caller_set():
    p = Policy(budget=4_000).with_(clear_at=0.4, clear_target=0.3)
    assert p.model_fields_set == {"budget", "clear_at", "clear_target"}
    assert Policy.preset("lean", budget=3_000).model_fields_set >= {"name", "summarize", "trim_target", "budget"}
    assert p.session_settings(only_set=True) == {"budget": 4_000, "clear_at": 0.4, "clear_target": 0.3}


# -- reopening a stored session -------------------------------------------------------------------


def test_process_settings_changed_on_reopen_raise_nothing_and_are_never_stored(store):
    first = ContextManager(store, POLICY, runtime=RuntimeSettings(summarizer_timeout_s=20, summarizer_model="a"))
    s = first.session("u", "s")
    s.append([system(), user("hi")])
    assert not set(RUNTIME_FIELDS) & set(_stored_policy(store))
    other = RuntimeSettings(summarizer_timeout_s=30, summarizer_model="b", summarizer_max_retries=4)
    again = ContextManager(store, POLICY, runtime=other).session("u", "s")
    assert again.policy == s.policy and len(again.messages) == 2 and again.version == s.version
    assert not any(ev.get("stage") == "policy_migrated" for ev in again.events())


def test_fields_the_caller_leaves_unset_keep_their_stored_values(store):
    ContextManager(store, POLICY).session("u", "s").append([system(), user("hi")])
    # the caller sets only the budget: keep_recent_cycles 3 (stored) is not compared with the default 1
    again = ContextManager(store, Policy(budget=5_000)).session("u", "s")
    assert again.policy.keep_recent_cycles == 3 and again.policy.budget == 5_000
    assert _stored_policy(store)["keep_recent_cycles"] == 3


def test_a_changed_session_setting_raises_naming_it_and_changes_nothing(store):
    s = ContextManager(store, POLICY).session("u", "s")
    s.append([system(), user("hi")])
    before = _stored_policy(store)
    with pytest.raises(PolicyMismatch) as e:
        ContextManager(store, POLICY.with_(clear_at=0.4, clear_target=0.3)).session("u", "s")
    assert e.value.fields == {"clear_at": (0.5, 0.4), "clear_target": (0.35, 0.3)}
    assert "clearing.clear_at: stored 0.5, given 0.4" in str(e.value)
    assert "migrate_policy=True" in e.value.hint
    assert _stored_policy(store) == before
    again = ContextManager(store).session("u", "s")
    assert again.version == s.version and not any(ev.get("stage") == "policy_migrated" for ev in again.events())


def test_the_adopt_path_takes_the_given_fields_keeps_the_rest_and_records_it(store):
    ContextManager(store, POLICY).session("u", "s").append([system(), user("hi")])
    given = Policy(clear_at=0.4, clear_target=0.3)
    moved = ContextManager(store, given).session("u", "s", migrate_policy=True)
    assert (moved.policy.clear_at, moved.policy.clear_target) == (0.4, 0.3)
    assert (moved.policy.budget, moved.policy.keep_recent_cycles) == (5_000, 3), "unset fields kept as stored"
    [ev] = [ev for ev in moved.events() if ev.get("stage") == "policy_migrated"]
    assert ev["detail"] == {"clear_at": {"stored": 0.5, "given": 0.4}, "clear_target": {"stored": 0.35, "given": 0.3}}
    stored = _stored_policy(store)
    assert (stored["clear_at"], stored["budget"], stored["keep_recent_cycles"]) == (0.4, 5_000, 3)
    reopened = ContextManager(store, given).session("u", "s")  # no mismatch any more
    assert reopened.policy == moved.policy and reopened.version == moved.version


# -- a session stored by an older version ---------------------------------------------------------


def test_a_session_stored_by_an_older_version_reopens_with_the_readme_code(tmp_path):
    """tests/fixtures/old_session/old_session.db was written by commit d72ab04, whose defaults
    were keep_recent_cycles 2 and summary_target 0.1 and whose policy held the summarizer's
    process settings; before this change the README's code raised PolicyMismatch on it."""
    db = tmp_path / "ctxwise.db"
    shutil.copy(FIXTURE, db)
    import sqlite3

    with sqlite3.connect(db) as con:
        [(raw,)] = con.execute("select policy from sessions").fetchall()
    raw_policy = json.loads(raw)
    assert raw_policy["summarizer_timeout_s"] == 20.0 and raw_policy["keep_recent_cycles"] == 2
    assert raw_policy["summary_target"] == 0.1 and Policy().summary_target != 0.1
    with pytest.raises(PolicyError, match="a process setting"):
        Policy(**raw_policy)
    stored = Policy.from_stored(raw_policy)  # what the inspector reads: the process settings ignored
    assert (stored.keep_recent_cycles, stored.summary_target, stored.budget) == (2, 0.1, 60_000)

    # the README's "Using it in an agent" code as the fixture's version wrote it (today's counts with
    # tokenizer="estimate", so that it runs on the core install)
    policy = Policy(budget=60_000, unit="tokens", reserve_output=4_000, provider="openai")
    cm = ContextManager(f"sqlite:///{db}", policy)
    session = cm.session("user-42", "chat-7", tools=[])
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert (session.policy.keep_recent_cycles, session.policy.summary_target) == (2, 0.1)
    session.append_openai([{"role": "user", "content": "The frame is cracked near the fork."}])
    prepared = session.prepare()
    assert prepared.payload[0] == {"role": "system", "content": "You are the after-sales agent of a bicycle shop."}
    assert prepared.payload[-1]["content"] == "The frame is cracked near the fork."
    cm.close()

    # adopting today's values for the moved defaults is explicit
    with ContextManager(f"sqlite:///{db}", policy.with_(keep_recent_cycles=1, summary_target=0.09)) as cm:
        with pytest.raises(PolicyMismatch, match="summarizing.summary_target: stored 0.1, given 0.09"):
            cm.session("user-42", "chat-7")
        moved = cm.session("user-42", "chat-7", migrate_policy=True)
        assert (moved.policy.keep_recent_cycles, moved.policy.summary_target) == (1, 0.09)
        assert len(moved.messages) == 6


def test_the_readme_policy_file_feeds_both_objects(tmp_path):
    readme = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    (toml,) = re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
    f = tmp_path / "policy.toml"
    f.write_text(toml, encoding="utf-8")
    policy, runtime = Policy.from_toml(f), RuntimeSettings.from_toml(f)
    assert (policy.budget, policy.provider) == (8000, "anthropic")
    assert runtime == RuntimeSettings(summarizer_timeout_s=30)
    with ContextManager(f"sqlite:///{tmp_path / 'c.db'}", policy, runtime=runtime) as cm:
        assert cm.runtime.summarizer_timeout_s == 30 and cm.summarizer.name == "digest"


def test_the_inspector_reads_a_session_an_older_version_stored(tmp_path):
    """The inspector builds the stored policy for its pages; the process settings an older
    version stored in it are ignored, not refused."""
    from ctxwise import SqlStore
    from ctxwise.server.calls import session_calls
    from ctxwise.server.pages import policy_table

    db = tmp_path / "ctxwise.db"
    shutil.copy(FIXTURE, db)
    store = SqlStore(f"sqlite:///{db}")
    try:
        state = store.load("user-42", "chat-7", include_hidden=True)
        events = store.events("user-42", "chat-7")
        assert "budget 56,000 tokens after the reserve" in policy_table(state)
        calls = session_calls(state, events, store.transcript("user-42", "chat-7"))
        assert len(calls) == 2 and all(c.size > 0 for c in calls)
    finally:
        store.close()


def test_a_retired_setting_is_refused_with_its_reason_and_a_stored_one_reopens_without_it():
    """``edit_horizon`` (the calls an early edit had to pay back within) is gone: nothing is
    edited under the hard limit while the cache is warm. A new policy naming it gets the reason;
    a session stored with it reopens (``Policy.from_stored``) with everything else as stored."""
    with pytest.raises(PolicyError, match="edit_horizon: a retired setting"):
        Policy(edit_horizon=4)
    stored = Policy.from_stored({"edit_horizon": 50, "budget": 7_000, "clear_at": 0.4})
    assert (stored.budget, stored.clear_at) == (7_000, 0.4) and "edit_horizon" not in stored.session_settings()
