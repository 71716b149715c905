"""``now`` on the HTTP prepare (issue 25 item 7): the request time the library's
``prepare(now=...)`` takes, through the real app under uvicorn. A cache idle past its
lifetime (Anthropic 5 minutes, docs.anthropic.com/en/docs/build-with-claude/prompt-caching)
makes an optional clearing free, so it fires; the same call without ``now`` does not."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx

from ctxwise import ContextManager
from tests.test_cache_time import T0, policy, stamped, two_turns_then_a_question
from builders import user

from .conftest import Live, raw, start_server, stop_server


def _session(http: httpx.Client, sid: str, messages: list[Any]) -> int:
    body = {"format": "canonical", "messages": [m.model_dump(mode="json") for m in messages]}
    r = http.post(f"/v1/sessions/{sid}/messages", params={"user_id": "u"}, json=body)
    assert r.status_code == 200, raw(r)
    version: int = r.json()["version"]
    return version


def test_http_prepare_takes_now_as_the_library_does(live: Live, tmp_path) -> None:
    """Timestamps 2 s apart and a question without one: with ``now`` an hour later (epoch
    seconds, or an ISO date-time) the prepare clears, as the library's ``prepare(now=)`` does,
    byte for byte; without ``now`` nothing fires; a ``now`` that is no time is a 422 naming the
    field, and the session's version is unchanged. The OpenAPI schema documents the field."""
    server, thread, url = start_server(live.store_url, policy())
    msgs = stamped(two_turns_then_a_question(), step=2.0) + [user("And the third order?")]
    later = T0 + timedelta(hours=1)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {live.keys['a']}"}, timeout=60) as http:
            for sid, now in (("epoch", later.timestamp()), ("iso", later.isoformat()), ("none", None)):
                version = _session(http, sid, msgs)
                body = {} if now is None else {"now": now}
                bad = http.post(f"/v1/sessions/{sid}/prepare", params={"user_id": "u"}, json={"now": "yesterday"})
                assert bad.status_code == 422 and "now" in raw(bad)
                p = http.post(f"/v1/sessions/{sid}/prepare", params={"user_id": "u"}, json=body)
                assert p.status_code == 200, raw(p)
                stages = [(e["stage"], "cold" in e["trigger"]) for e in p.json()["events"]]
                assert stages == ([] if now is None else [("clearing", True)])
                assert p.json()["version"] == version + (now is not None)
                with ContextManager(f"sqlite:///{tmp_path / (sid + '.db')}", policy()) as cm:
                    s = cm.session("u", sid)
                    s.append(msgs)
                    mine = s.prepare(now=None if now is None else later)
                    assert p.json()["payload"] == mine.payload and p.json()["size"] == mine.size
            schema = http.get("/openapi.json").json()["components"]["schemas"]["PrepareRequest"]["properties"]
            assert "now" in schema and "epoch seconds" in schema["now"]["description"]
    finally:
        stop_server(server, thread)
