"""Several server processes' worth of nodes on one database (SQLite and PostgreSQL): every
request may land on another node, nothing is served stale, and of writers that read the same
version exactly one wins (409 for the others, nothing stored twice)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from ctxwise import ContextManager
from ctxwise.formats import load, to_openai

from .conftest import POLICY, Live, canonical_json, raw, start_server, stop_server
from .test_api import RETAIL, model_calls


def test_alternating_nodes_serve_the_library_payload_and_one_writer_wins(live: Live, tmp_path):
    """Kind: a node serving from what it cached while another node wrote (a stale context, a
    lost append), or two nodes both accepting writes made on the same version."""
    server2, thread2, url2 = start_server(live.store_url)
    nodes = [live.client("a"), httpx.Client(base_url=url2, headers={"Authorization": f"Bearer {live.keys['a']}"},
                                            timeout=60)]
    try:
        conv = load(RETAIL)[3]
        msgs = to_openai(conv.messages, extras=False)
        turn = 0
        with ContextManager(f"sqlite:///{tmp_path / 'lib.db'}", POLICY) as cm:
            lib = cm.session("u", "n")
            for batch in model_calls(msgs):
                node = nodes[turn % 2]
                turn += 1
                r = node.post("/v1/sessions/n/messages", params={"user_id": "u"},
                              json={"format": "openai", "messages": batch})
                assert r.status_code == 200, raw(r)
                lib.append_openai(batch)
                if batch[-1]["role"] == "assistant" and not batch[-1].get("tool_calls"):
                    continue
                node = nodes[turn % 2]  # the prepare goes to the other node than the append
                turn += 1
                p = node.post("/v1/sessions/n/prepare", params={"user_id": "u"})
                assert p.status_code == 200, raw(p)
                assert canonical_json(p.json()["payload"]) == canonical_json(lib.prepare().payload)
        # a race: 8 appends made on the same version, spread over both nodes
        version = nodes[0].get("/v1/sessions/n/context", params={"user_id": "u"}).json()["version"]

        def attempt(i: int) -> int:
            body = {"format": "canonical", "expected_version": version, "messages": [
                {"id": f"race-{i}", "role": "user", "blocks": [{"type": "text", "text": f"attempt {i}"}]}]}
            return nodes[i % 2].post("/v1/sessions/n/messages", params={"user_id": "u"}, json=body).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(attempt, range(8)))
        assert sorted(codes) == [200] + [409] * 7, codes
        ctx = nodes[1].get("/v1/sessions/n/context", params={"user_id": "u"}).json()
        assert ctx["version"] == version + 1
        assert sum(m["id"].startswith("race-") for m in ctx["messages"]) == 1
    finally:
        nodes[1].close()
        stop_server(server2, thread2)
