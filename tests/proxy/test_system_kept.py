"""replace_system: a system prompt re-sent unchanged is found unchanged without converting it
again, and every change (also back to an earlier prompt) is still replaced with its event."""
from __future__ import annotations

from pathlib import Path

from ctxwise import ContextManager, Policy
from ctxwise.proxy import conversation
from ctxwise.proxy.conversation import replace_system
from ctxwise.proxy.wire import ROUTES

CHAT = ROUTES["/v1/chat/completions"]


def test_unchanged_prompts_are_kept_and_each_change_replaced(tmp_path: Path, monkeypatch) -> None:
    manager = ContextManager(f"sqlite:///{tmp_path / 's.db'}", policy=Policy(provider="openai"))
    s = manager.session("u", "s", create=True)
    s.append_openai([{"role": "system", "content": "rules v1"}, {"role": "user", "content": "hi"}])
    converted: list[int] = []
    real = conversation._system_messages

    def counting(route, items):  # type: ignore[no-untyped-def]
        converted.append(len(items))
        return real(route, items)

    monkeypatch.setattr(conversation, "_system_messages", counting)
    v1 = [{"role": "system", "content": "rules v1"}]
    assert replace_system(s, CHAT, v1) == 0 and len(converted) == 1
    version = s.version
    for _ in range(3):
        assert replace_system(s, CHAT, [{"content": "rules v1", "role": "system"}]) == 0
    assert len(converted) == 1 and s.version == version  # the same items: not converted, nothing written
    assert replace_system(s, CHAT, [{"role": "system", "content": "rules v2"}]) == 1
    assert s.messages[0].text == "rules v2"
    assert replace_system(s, CHAT, [{"role": "system", "content": "rules v2"}]) == 0
    assert replace_system(s, CHAT, v1) == 1  # back to the first prompt: a change again
    assert s.messages[0].text == "rules v1"
    stages = [e["stage"] for e in manager.store.read_events("u", "s")]
    assert stages.count("system_replaced") == 2


def test_a_prompt_replaced_elsewhere_is_compared_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    manager = ContextManager(url, policy=Policy(provider="openai"))
    s = manager.session("u", "s", create=True)
    s.append_openai([{"role": "system", "content": "rules v1"}, {"role": "user", "content": "hi"}])
    v1 = [{"role": "system", "content": "rules v1"}]
    assert replace_system(s, CHAT, v1) == 0
    other = ContextManager(url, policy=Policy(provider="openai")).session("u", "s")
    assert replace_system(other, CHAT, [{"role": "system", "content": "another process's prompt"}]) == 1
    s.reload()  # the stored prompt is now the other one: the items s last saw unchanged are a change again
    assert replace_system(s, CHAT, v1) == 1 and s.messages[0].text == "rules v1"
