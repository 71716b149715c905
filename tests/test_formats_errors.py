"""Bad inputs raise FormatError naming the place and the rule."""

from __future__ import annotations

import json

import pytest

from ctxwise.errors import FormatError
from ctxwise.formats import MAX_FILE_BYTES, dump, from_anthropic, from_openai, load


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_not_json_names_line_and_column(tmp_path):
    p = _write(tmp_path, "bad.json", '{"messages": [\n  {"role": "user", "content": "hi"\n]}')
    with pytest.raises(FormatError) as e:
        load(p)
    assert str(p) in str(e.value) and "line 3 column 1" in str(e.value) and "not JSON" in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_jsonl_line(tmp_path):
    p = _write(tmp_path, "c.jsonl", '{"messages": []}\n{"messages": [}\n')
    with pytest.raises(FormatError, match=r"c\.jsonl: line 2 column \d+: not JSON"):
        load(p)


def test_unknown_block_type(tmp_path):
    p = _write(tmp_path, "a.json", {"system": "s", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "hologram", "id": "x"}]}]})
    with pytest.raises(FormatError) as e:
        load(p)
    msg = str(e.value)
    assert str(p) in msg and "message 1, block 0" in msg and "unknown block type 'hologram'" in msg


def test_tool_result_with_no_call(tmp_path):
    p = _write(tmp_path, "o.json", [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_1", "content": "x"}])
    with pytest.raises(FormatError, match=r"o\.json: message 1: \[orphan-tool-result\] tool result with no call: 'call_1'"):
        load(p)
    with pytest.raises(FormatError, match="tool result with no call"):
        from_openai([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "b", "content": "x"}])
    with pytest.raises(FormatError, match=r"message 1, block 0: \[orphan-tool-result\] tool result with no call"):
        from_anthropic({"messages": [{"role": "user", "content": "a"},
                                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]})


def test_tool_result_with_no_call_in_tau2_names_simulation(tmp_path):
    p = _write(tmp_path, "r.json", {"info": {}, "simulations": [{"id": "s1", "messages": [
        {"role": "assistant", "content": "hi", "tool_calls": None},
        {"role": "tool", "id": "nope", "content": "x", "requestor": "assistant", "error": False}]}]})
    with pytest.raises(FormatError, match=r"r\.json: simulation 0 \(s1\), message 1: \[orphan-tool-result\] tool result with no call"):
        load(p)


def test_file_over_limit_refused_before_reading(tmp_path):
    p = tmp_path / "big.json"
    with p.open("wb") as f:  # sparse: the size is there, the bytes are never read
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(FormatError, match=r"big\.json: file is \d+ bytes, larger than the 20971520-byte limit"):
        load(p)
    small = _write(tmp_path, "s.json", [{"role": "user", "content": "x" * 200}])
    with pytest.raises(FormatError, match="larger than the 100-byte limit"):
        load(small, max_bytes=100)


def test_unknown_shape(tmp_path):
    p = _write(tmp_path, "u.json", {"foo": [1, 2]})
    with pytest.raises(FormatError) as e:
        load(p)
    assert str(e.value).startswith(f"{p}: not a known format: expected one of")
    with pytest.raises(FormatError, match="not a known format"):
        load(_write(tmp_path, "n.json", "42"))


def test_unknown_role_and_part(tmp_path):
    with pytest.raises(FormatError, match="message 0: unknown role 'robot'"):
        from_openai([{"role": "robot", "content": "x"}])
    with pytest.raises(FormatError, match="message 0, part 0: unknown block type 'hologram'"):
        from_openai([{"role": "user", "content": [{"type": "hologram", "hologram": {}}]}])
    with pytest.raises(FormatError, match="message 0, part 0: input_audio needs string 'data' and 'format'"):
        from_openai([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}])
    with pytest.raises(FormatError, match="unknown format 'xml'"):
        dump([], "xml")
