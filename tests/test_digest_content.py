"""The digest keeps what the agent said (issue 11, item 6): values the assistant stated,
JSON-wrapped replies unwrapped, tool findings with their values (not call ids), and the
user's requirements once."""

from __future__ import annotations

import json
import re

from builders import assistant, results, user
from ctxwise.compaction import placeholder_text
from ctxwise.policy import Policy
from ctxwise.summarizers import DigestSummarizer
from ctxwise.summarizers.digest import stated, unwrap

ORDER = json.dumps({"order_id": "#W4923227", "items": [{"name": "Bluetooth Speaker", "price": 321.18}],
                    "status": "pending", "notes": "n" * 300})


def test_assistant_values_are_kept_not_only_the_first_sentence():
    """Kind: a later answer quotes a total the assistant stated mid-reply, after a summary."""
    reply = ("Thanks for waiting. I checked everything carefully. The refund comes to $466.75 "
             "and reaches you by 2024-06-01. Anything else?")
    out = DigestSummarizer().summarize([user("refund please"), assistant(reply)], None, 4000).text
    assert "$466.75" in out and "2024-06-01" in out and "Thanks for waiting." in out
    assert "I checked everything carefully." not in out  # no value: left out
    assert stated("x" * 50 + ". " + "Total $1. " * 100, limit=120).count("$1") <= 7


def test_json_wrapped_replies_are_unwrapped():
    """Kind: a model answering in a JSON envelope ({"message": ...}); the digest used to keep nothing."""
    wrapped = json.dumps({"message": "Order #W77 is cancelled. The refund is $39.00."})
    assert unwrap(wrapped) == "Order #W77 is cancelled. The refund is $39.00."
    assert unwrap('{"other": 1}') == '{"other": 1}' and unwrap("not {json}") == "not {json}"
    out = DigestSummarizer().summarize([user("cancel #W77"), assistant(wrapped)], None, 4000).text
    assert "Order #W77 is cancelled. The refund is $39.00." in out and '{"message"' not in out


def test_tool_findings_carry_values_not_call_ids_also_when_cleared():
    """Kind: a summarized tool result listed as "returned call_001" (the id a placeholder names)."""
    call = assistant(calls=[("get_order_details", {"order_id": "#W4923227"})])
    (res,) = results(call, [ORDER])
    out = DigestSummarizer().summarize([user("where is my order"), call, res], None, 4000).text
    assert "order_id=#W4923227" in out and "price=321.18" in out and "status=pending" in out
    cid = call.tool_uses[0].id
    block = res.tool_results[0]
    cleared = res.model_copy(update={"blocks": [block.model_copy(update={"output": [
        block.output[0].model_copy(update={"text": placeholder_text(Policy.preset("default"), block, {})})]})]})
    out2 = DigestSummarizer().summarize([user("where is my order"), call, cleared], None, 4000).text
    findings = [ln for ln in out2.splitlines() if "get_order_details" in ln and "returned" in ln]
    assert findings and "321.18" in findings[0] and cid not in findings[0].split("returned", 1)[1]


def test_user_requirements_appear_once():
    """Kind: the user's words written twice (as requirements and as pinned facts) in one summary."""
    req = "Keep the total under 500 USD and ship before 2025-03-14."
    other = "Use the card ending 7815."
    out = DigestSummarizer().summarize([user(req), user(other), assistant("Noted.")], None, 4000, facts=[req]).text
    # the pinned facts block beside the summary quotes it: the summary does not
    assert "500 USD" not in out and "Pinned facts" not in out
    assert out.count("card ending 7815") == 1  # not pinned: quoted here, once
    assert DigestSummarizer().summarize([user(req), assistant("Noted.")], None, 4000).text.count("500 USD") == 1
    # a previous summary that still had the section (or the quote, pinned since) rolls in without it
    old = f'User requirements (verbatim):\n- The user said: "{req}"\nPinned facts:\n- "{req}"'
    again = DigestSummarizer().summarize([user("ok")], old, 4000, facts=[req]).text
    assert "500 USD" not in again
    # a pinned clause of a request does not stand for the whole request: the rest would be lost
    book = "Book me a flight to Lisbon, not before 2024-06-01, under $300, and no red-eye."
    out = DigestSummarizer().summarize([user(book), assistant("Searching.")], None, 4000,
                                       facts=["not before 2024-06-01", "under $300"]).text
    assert "Lisbon" in out and "no red-eye" in out
    # the pinned clauses are elided (the pinned block beside the summary quotes them), not repeated
    assert 'The user said: "Book me a flight to Lisbon, …, …, and no red-eye."' in out and "2024-06-01" not in out


def test_a_requirement_reaches_the_model_once_with_the_summary_and_the_pinned_facts():
    """Kind: the payload of a summarized session quoting each request twice (the summary's
    "User requirements" and the pinned facts block beside it)."""
    import json

    from ctxwise import ContextManager
    from ctxwise.policy import Policy as P

    cm = ContextManager("memory://", P(budget=6000, unit="tokens", provider="openai"))
    s = cm.session("alice", "orders")
    s.append_openai([{"role": "system", "content": "You are a shop agent."}])
    summarized = False
    for i in range(14):
        s.append_openai([{"role": "user", "content": f"Please check order #W{1000 + i}. What's its status?"}])
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": f"#W{1000 + i}"})}}
        s.append_openai([{"role": "assistant", "content": None, "tool_calls": [call]}])
        body = {"order_id": f"#W{1000 + i}", "status": "pending", "total": 100 + i,
                "items": [{"item_id": f"{4000000000 + 7 * i + j}", "note": "lorem ipsum " * 40} for j in range(4)]}
        s.append_openai([{"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps(body)}])
        p = s.prepare()
        summarized = summarized or any(e.stage == "summarizing" for e in p.events)
        s.append_openai([{"role": "assistant", "content": f"Order #W{1000 + i} is pending, total ${100 + i}."}])
    payload = json.dumps(s.prepare().payload)
    assert summarized and "Pinned facts" in payload
    assert payload.count("Please check order #W1000.") == 1
    # and what the agent said about the summarized orders is kept in its words
    assert "Order #W1000 is pending, total $100." in payload or "Order #W1001 is pending, total $101." in payload


def test_values_of_items_dropped_to_fit_the_target_stay_in_the_summary():
    """Kind: a tight summary target drops the oldest replies whole, and with them the totals and
    dates a later answer quotes; their values now stay, on one line, and roll over."""
    material = []
    for k in range(8):
        material += [user(f"question {k}"),
                     assistant(f"Reply {k} is long enough to matter. Your total is ${100 + k}.25 due 2024-06-{10 + k}.")]
    full = DigestSummarizer().summarize(material, None, 10_000).text
    tight = DigestSummarizer().summarize(material, None, 700).text
    assert len(tight) <= 700 < len(full)
    assert "Reply 0 is long" not in tight  # the oldest reply went to fit
    assert "$100.25" in tight and "2024-06-10" in tight  # its values did not
    # Rolled into the next pass, the values line is read back and kept (newest values win space).
    again = DigestSummarizer().summarize([user("next"), assistant("Noted. Your refund is $9.99.")], tight, 700).text
    assert "$100.25" in again and "$9.99" in again and len(again) <= 700


def test_amounts_and_versions_are_not_cut_at_their_decimal_point():
    """Kind: the digest quoting "$154." for "$154.17" (a sentence split at a decimal point), in
    the user's verbatim requirements and in where the conversation stood."""
    reply = "The AC adapter (available, $154.17) fits model v2.5 too. Shall I order it?"
    out = DigestSummarizer().summarize([user("I can spend at most $160.50 on it."), assistant(reply)], None, 4000).text
    assert "$154.17" in out and "v2.5" in out and "$160.50 on it." in out
    assert "$154." not in out.replace("$154.17", "") and "$160." not in out.replace("$160.50", "")


def test_the_summary_target_counts_characters_as_sent_not_stored_metadata():
    """Kind: a summary target inflated by metadata that is never sent (a recording's raw copy of
    each message): the summarizer was asked for 2-5x the policy's summary_target."""
    from ctxwise.compaction import Budgeting
    from ctxwise.compaction.summarizing import summarize_range
    from ctxwise.tokens import get_counter

    class Spy(DigestSummarizer):
        asked: list[int] = []

        def summarize(self, material, previous, target_chars, *, facts=()):
            Spy.asked.append(target_chars)
            return super().summarize(material, previous, target_chars, facts=facts)

    plain = [user(f"question {k} " + "q" * 200) for k in range(4)]
    heavy = [m.model_copy(update={"metadata": {"raw_data": {"copy": m.text * 20}}}) for m in plain]
    b = Budgeting(Policy.preset("default", budget=3000, unit="tokens"), get_counter("o200k_base"))
    for material in (plain, heavy):
        summarize_range(material + [user("now")], b, b.size(material), Spy(), 0, len(material), trigger="t", t0=0.0)
    assert Spy.asked[0] == Spy.asked[1]


def test_a_date_with_a_comma_stays_one_value_when_the_values_line_is_read_back():
    """Kind: the values line split on ", " when a summary rolled, so "May 1, 2024" came back as
    "May 1" and "2024", and dropping the oldest value to fit left the year alone."""
    material = []
    for k in range(6):
        material += [user(f"question {k}"),
                     assistant(f"Reply {k} is long enough to matter here. You fly on May {k + 1}, 2024.")]
    tight = DigestSummarizer().summarize(material, None, 500).text
    assert "May 1, 2024" in tight and "Reply 0 is long" not in tight
    for target in range(480, 300, -10):  # tighter passes: the oldest values go first, whole
        again = DigestSummarizer().summarize([user("next"), assistant("Noted.")], tight, target).text
        lines = [ln for ln in again.splitlines() if ln.startswith("- May") or ln.startswith("- 2024")]
        assert all(ln.startswith("- May") for ln in lines), (target, lines)


def _reads(n: int) -> list:
    """``n`` file views, each a source file defining 60 functions (``total_<k>_<i>``)."""
    msgs: list = [user("Refactor the billing package; read every module first.")]
    for k in range(n):
        call = assistant(calls=[("open_file", {"path": f"src/pkg/billing_{k}.py"})])
        msgs += [call, *results(call, ["\n".join(f"{i}\tdef total_{k}_{i}(): return {i}" for i in range(60))])]
    return msgs


def test_files_read_are_all_named_and_code_symbols_are_no_values():
    """Kinds (fresh report, item 10): "Files read" naming 1 of ~50 files read, and the values
    line filled with the function names of the dropped views (``total_43_7; total_43_8``)."""
    out = DigestSummarizer().summarize(_reads(50), None, 1200).text
    values = next((ln for ln in out.splitlines() if ln.startswith("Values stated")), "")
    assert "total_" not in out.split("Files read:")[0] + values and "billing_" not in values
    section = out.split("Files read:\n", 1)[1].split("\n", 1)[0] if "Files read:\n" in out else ""
    assert section.startswith("- also read: ")
    listed = {int(x) for x in re.findall(r"billing_(\d+)\.py", out)}
    more = re.search(r"\(and (\d+) more\)", out)
    assert len(listed) + (int(more.group(1)) if more else 0) == 50  # every file named or counted
    assert 49 in listed and len(out) <= 1200
    # a second pass (rolling) keeps the count: 50 files before, 10 more now
    again = DigestSummarizer().summarize(_reads(60)[101:], out, 1200).text
    listed = {int(x) for x in re.findall(r"billing_(\d+)\.py", again)}
    more = re.search(r"\(and (\d+) more\)", again)
    assert len(listed) + (int(more.group(1)) if more else 0) == 60 and 59 in listed
    # with room, each file keeps its lines and symbols
    roomy = DigestSummarizer().summarize(_reads(3), None, 20_000).text
    assert "src/pkg/billing_0.py, lines" in roomy and "total_0_0" in roomy


def test_a_shell_command_chaining_edits_names_each_file_edited():
    """Kind: ``sed -i ... related_lookups.py && sed -i ... lookups.py`` listed only under the
    first file; the second was never named as edited."""
    from ctxwise.summarizers.digest import shell_edits, shell_steps

    cmd = ("cd /testbed && sed -i 's/old_a/new_a/' django/contrib/admin/related_lookups.py && "
           "sed -i 's/x;y/z/' django/db/models/lookups.py; python -m pytest tests/lookup -q")
    call = assistant(calls=[("bash", {"command": cmd})])
    out = DigestSummarizer().summarize([user("Fix the lookups."), call, *results(call, ["3 passed"])],
                                       None, 4000).text
    edited = out.split("Files edited:\n", 1)[1].split(":\n", 1)[0]
    assert "/testbed/django/contrib/admin/related_lookups.py" in edited
    assert "/testbed/django/db/models/lookups.py" in edited
    assert shell_steps("a 'b && c' && d; e || f") == ["a 'b && c'", "d", "e", "f"]
    # the recorded django-14351 command: the second edit on a continued line
    chained = ("sed -i '/DEBUG: RelatedIn.as_sql/d' django/db/models/fields/related_lookups.py && \\\n"
               "sed -i '/DEBUG: In.process_rhs/d' django/db/models/lookups.py")
    assert shell_edits(assistant(calls=[("bash", {"command": chained})]).tool_uses[0]) == [
        "django/db/models/fields/related_lookups.py", "django/db/models/lookups.py"]
    run = assistant(calls=[("bash", {"command": "make && tee out/log.txt < x"})])
    assert shell_edits(run.tool_uses[0]) == ["out/log.txt"]


def test_a_dropped_command_keeps_the_values_of_its_outcome_not_of_its_command():
    calls = []
    for k in range(30):
        call = assistant(calls=[("bash", {"command": f"python scripts/run_step_{k}.py --job build_{k}"})])
        calls += [call, *results(call, [f"created job JOB-{k:04d}X"])]
    out = DigestSummarizer().summarize([user("Run every step."), *calls], None, 900).text
    values = next(ln for ln in out.splitlines() if ln.startswith("- JOB-") or "JOB-0000X" in ln)
    assert "JOB-0000X" in values and "run_step_0" not in values and "build_0" not in values
