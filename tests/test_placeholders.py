"""Salient placeholders: a cleared result keeps its key values inline, bounded, byte-stable,
and names the tool_use_id the recall tool fetches the original by (issue 11, item 5)."""

from __future__ import annotations

import json

from ctxwise.compaction import placeholder_text
from ctxwise.compaction.placeholder import distill, key_values
from ctxwise.messages import TextBlock, ToolResultBlock
from ctxwise.policy import Policy
from ctxwise.replay import metrics

ORDER = {
    "order_id": "#W4923227", "user_id": "isabella_lopez_6490",
    "address": {"address1": "710 Sunset Drive", "city": "Phoenix", "zip": "85034"},
    "items": [{"name": "Bluetooth Speaker", "item_id": "7751905257", "price": 321.18,
               "options": {"color": "red", "battery life": "10 hours"}}],
    "status": "pending", "payment_history": [{"transaction_type": "payment", "amount": 321.18,
                                              "payment_method_id": "credit_card_8554680"}],
    "delivered": "2024-05-05", "note": "x" * 400,
}


def result(body: str, id_: str = "call_8ONA") -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=id_, name="get_order_details", output=[TextBlock(text=body)])


def test_placeholder_keeps_ids_amounts_dates_status_and_names_and_the_id():
    """Kind: a cleared JSON tool result whose values later answers quote (ids, amounts, dates,
    statuses, names): each stays readable in the placeholder."""
    body = json.dumps(ORDER)
    text = placeholder_text(Policy.preset("default", placeholder_values_max=400), result(body), {"order_id": "#W4923227"})
    for v in ("#W4923227", "isabella_lopez_6490", "7751905257", "321.18", "pending", "Bluetooth Speaker",
              "credit_card_8554680", "2024-05-05", "call_8ONA", "recall_tool_result"):
        assert v in text, v
    assert "Phoenix" not in text and "x" * 20 not in text  # not a key value: dropped
    assert len(text) < len(body)
    default = placeholder_text(Policy.preset("default"), result(body), {})
    for v in ("#W4923227", "status=pending", "call_8ONA"):  # at the default size: the references and the state
        assert v in default, v
    # the replay's recoverable measure sees the placeholder as naming its original
    assert result(body).tool_use_id in text


def test_values_are_bounded_cut_between_whole_values_salient_first():
    body = json.dumps({"orders": [f"#W{1000000 + i}" for i in range(60)], "status": "active"})
    out = distill(body, 80)
    assert len(out) <= 80 and out.endswith("; …")
    assert out.startswith("orders=#W1000000, ")  # the key once, before its values
    parts = out.removeprefix("orders=").removesuffix("; …").split(", ")
    assert len(parts) >= 5 and all(p.startswith("#W") and len(p) == len("#W1000000") for p in parts)  # whole values only
    assert "status=active" not in out  # kept for its key alone: after the salient values, no room left
    assert distill(body, 0) == "" and distill("no values here", 100) == ""
    assert [t for _, t in key_values("Order W77 costs $12.50 on 2024-01-02")] == ["W77", "$12.50", "2024-01-02"]


def test_a_list_of_records_writes_each_key_once():
    """Kind: a result listing several records with the same fields (flights, orders, items):
    the key is written once, its values after it in the body's order, so more values fit in
    the same characters than as ``key=value`` pairs."""
    flights = [{"flight_number": f"HAT{i:03d}", "date": f"2024-05-{i + 10}", "price": 100 + i} for i in range(4)]
    out = distill(json.dumps({"flights": flights, "status": "confirmed"}), 400)
    assert out == ("flight_number=HAT000, HAT001, HAT002, HAT003; date=2024-05-10, 2024-05-11, 2024-05-12, "
                   "2024-05-13; price=100, 101, 102, 103; status=confirmed")
    pairs = ", ".join(f"{k}={v}" for f in flights for k, v in f.items())
    assert len(out) < len(pairs)


def test_placeholder_is_byte_stable_and_ragent_keeps_its_exact_text():
    body = json.dumps(ORDER)
    p = Policy.preset("default")
    assert placeholder_text(p, result(body), {}) == placeholder_text(p, result(body), {})
    limited = placeholder_text(p.with_(placeholder_values_max=0), result(body), {})
    assert "=" not in limited and "call_8ONA" in limited
    rag = placeholder_text(Policy.preset("ragent"), result(body), {"q": "a"})
    assert rag == f"[历史工具结果已省略，原长 {len(body)} 字符，原入参 {{q=a}}]"


def test_a_placeholder_with_the_values_supports_them_in_the_recall_measure():
    from ctxwise.messages import Message, ToolUseBlock, text_message
    use = Message(id="a1", role="assistant", blocks=[ToolUseBlock(id="call_8ONA", name="get_order_details", input={})])
    full = result(json.dumps(ORDER))
    hist = [text_message("u", "user", "order #W4923227?"), use, Message(id="t", role="tool", blocks=[full])]
    cleared = full.model_copy(update={"output": [TextBlock(text=placeholder_text(Policy.preset("default"), full, {}))]})
    out = text_message("o", "assistant", "Order #W4923227 is pending: $321.18, delivered May 5, 2024.")
    s = metrics.call_support(hist, hist[:2] + [Message(id="t", role="tool", blocks=[cleared])], out)
    assert s.missing_norm == [] and set(s.needed_norm) == {"W4923227", "$321.18", "May 5, 2024"}


def test_values_that_name_records_go_first():
    """Kind: a result that lists the records the next calls will work through (a user's
    reservations, an order's item ids) beside many other salient values (e-mails, birth
    dates, timestamps): when not all fit, the references are the ones kept."""
    user = {"email": "sofia.kim1937@example.com", "dob": "1950-06-24",
            "payment_methods": {f"gift_card_{k}": {"source": "gift_card", "balance": 100.5 + k} for k in range(6)},
            "created_at": "2024-05-01T09:08:54", "reservations": ["OI5L9G", "OBUT9V", "4BMN53", "Q0ZF0J"],
            "membership": "gold"}
    out = distill(json.dumps(user), 80)
    assert "reservations=OI5L9G, OBUT9V, 4BMN53, Q0ZF0J" in out, out
    assert "created_at" not in out and out.endswith("; …")
    order = {"order_id": "#W123", "placed": "2024-01-02", "items": [{"item_id": f"IT-7751905{k}", "price": 10.5}
                                                                    for k in range(3)], "status": "pending"}
    assert distill(json.dumps(order), 80) == "order_id=#W123; item_id=IT-77519050, IT-77519051, IT-77519052; status=pending; …"


def test_a_value_holding_the_lists_own_separators_stays_one_value():
    """Kind: values with ", ", "; ", "=", quotes or brackets (addresses, free-text statuses):
    quoted, so they read as one value and cannot end the placeholder early; a value too long
    to fit leaves the ellipsis, not silence."""
    body = json.dumps({"order_id": "A1, B2", "status": "ok; done", "item_id": "id; x=1", "note_id": 'N7")]'})
    out = distill(body, 400)
    assert out == 'order_id="A1, B2"; status="ok; done"; item_id="id; x=1"; note_id="N7\\")]"'
    assert distill(json.dumps({"order_id": "W1234567890123"}), 12) == "…"


CODE = "\n".join(f"{i:6}\t{line}" for i, line in enumerate([
    "import os", "class Circle(Shape):", "    def area(self, r):", "        return 3.14159 * r * r",
    ".btn-primary { color: #ff0000 }", '<div class="card-body">', "async def main():", "RATE = 0.0825"], 10))

PYTEST = ("<returncode>1</returncode>\n======= test session starts =======\n"
          "platform linux -- Python 3.11.4, pytest-7.4.0, pluggy-1.3.0\nrootdir: /testbed\n"
          "collected 71 items\n" + "tests/test_geo.py ....F...F.\n" * 30
          + "object at 0x7f3eaafff100\nE   ValueError: radius must be positive\n"
          "FAILED tests/test_geo.py::test_area - ValueError: radius must be positive\n"
          "FAILED tests/test_geo.py::test_ring\n======= 2 failed, 69 passed in 1.23s =======\n")


def test_a_code_view_keeps_its_path_lines_and_the_symbols_it_defines():
    """Kind: a cleared view of source (numbered lines, as ``nl -ba`` / ``cat -n`` / Read print
    them): the placeholder names the file, the lines and the functions and classes defined
    there, never a CSS class or a numeric literal."""
    r = ToolResultBlock(tool_use_id="c1", name="bash", output=[TextBlock(text=CODE * 3)])
    text = placeholder_text(Policy.preset("default"), r, {"command": "nl -ba src/geo.py | sed -n '10,17p'"})
    for v in ("src/geo.py", "lines 10-17", "Circle", "area", "main", 'recall_tool_result("c1")'):
        assert v in text, v
    for junk in ("btn", "card", "3.14159", "0.0825", "ff0000"):
        assert junk not in text, junk


def test_a_test_log_keeps_its_verdict_failing_names_first_error_and_exit_status():
    """Kind: a cleared pytest run: the counts line, the FAILED names, the first error and the
    exit status stay; version strings and memory addresses go."""
    r = ToolResultBlock(tool_use_id="c2", name="bash", output=[TextBlock(text=PYTEST)])
    text = placeholder_text(Policy.preset("default"), r, {"command": "cd /testbed && python -m pytest tests"})
    for v in ("exit 1", "2 failed, 69 passed", "tests/test_geo.py::test_area", "tests/test_geo.py::test_ring",
              "ValueError: radius must be positive"):
        assert v in text, v
    for junk in ("3.11.4", "7.4.0", "0x7f3eaafff100"):
        assert junk not in text, junk
    assert text == placeholder_text(Policy.preset("default"), r, {"command": "cd /testbed && python -m pytest tests"})
