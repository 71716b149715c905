"""Pinned blocks that do not break the prompt cache (issue 11, item 3).

Kind of fault covered: a pinned block placed relative to the newest message (the facts block
before the current user input), so every new user turn moves it and the cached prefix breaks
on calls where no stage fired.
"""

from __future__ import annotations

from builders import assistant, results, system, user
from ctxwise import ContextManager
from ctxwise.policy import Policy
from ctxwise.replay.metrics import common_prefix


def turn(k: int) -> list:
    a = assistant(calls=[("lookup", {"order": f"W{k}"})])
    return [user(f"My order #W{100 + k} arrived broken, I paid $4{k}.50 on 2024-05-1{k}."), a,
            *results(a, [f"order W{100 + k}: " + "detail " * 120]),
            assistant(f"Order W{100 + k} noted. " + "We will look into it and come back to you. " * 8)]


def drive(s, turns: int) -> list:
    """Append turn after turn, preparing before each model call; returns the prepared calls."""
    out = []
    s.append([system("You are a shop's after-sales agent. " * 10)])
    for k in range(turns):
        msgs = turn(k)
        s.append(msgs[:1])
        out.append(s.prepare())
        s.append(msgs[1:3])
        out.append(s.prepare())
        s.append(msgs[3:])
    return out


def test_the_facts_block_stays_put_while_only_new_turns_arrive(store_url):
    policy = Policy.preset("default", budget=3_000, unit="chars", user_memory=False)
    cm = ContextManager(store_url, policy)
    s = cm.session("u-facts", "c1")
    calls = drive(s, 8)
    lossy = [k for k, p in enumerate(calls) if any(m.kind == "facts" for m in p.messages)]
    assert lossy, "the session never lost a turn: the test does not reach the facts block"
    quiet = 0
    for prev, cur in zip(calls[lossy[0]:], calls[lossy[0] + 1:]):
        if cur.events:
            continue  # a stage fired: the prefix may break where it edited
        quiet += 1
        # no stage fired: the whole previous payload is the cached prefix of this one
        assert common_prefix(prev.messages, cur.messages) == len(prev.messages)
    assert quiet, "every call fired a stage: nothing shows the block staying put"
    # the block stands right after the summary (or the head), never before the current input
    s.append([user("Anything else I should know about order #W108?")])
    last = s.prepare().messages
    at = next(i for i, m in enumerate(last) if m.kind == "facts")
    assert last[at - 1].kind == "summary" or last[at - 1].role == "system"
    # it holds the facts of lost turns: a lost order id, not the current turn's
    assert "W106" in last[at].text and "W108" not in last[at].text
    # a reload sends the same payload
    again = ContextManager(store_url, policy).session("u-facts", "c1").prepare()
    assert again.events == [] and [m.fingerprint() for m in again.messages] == [m.fingerprint() for m in last]
