"""Kind of fault: memory rules that eat ordinary words (issue 28, "Under attack"). The secret
rule matched "pin" anywhere in a word (the Chinese alternative ``PIN码?`` had no word
boundary), so "I'm allergic to spinach", "I love camping / shopping" and everything said
beside them were never stored (34 of 66 ordinary preferences lost in the report). Secrets and
instructions are refused by whole words and structured patterns now.

The set below was written for this test: food, hobbies, places, work, family, schedules,
several with "pin", "key", "pass", "token", "secret", "otp", "agent" inside other words or
used in their ordinary sense. Each names the words its stored entry must hold. The poisoning
sets (tests/hostile/test_memory_poisoning.py, bench/poisoning.py) still store nothing harmful.
"""

from __future__ import annotations

import pytest

from ctxwise.memory.repo import extract_and_store, list_memory
from ctxwise.memory.user import decide, has_secret, is_instruction

BENIGN = [
    # food (tricky: pin, key, pass, otp, tin, cid, bic)
    ("I'm allergic to spinach.", "spinach"),
    ("I love pineapple on pizza.", "pineapple"),
    ("I prefer turkey sandwiches to ham.", "turkey sandwiches"),
    ("My favourite fruit is passion fruit.", "passion fruit"),
    ("I really like Sichuan hotpot.", "hotpot"),
    ("I prefer pinot noir over merlot.", "pinot noir"),
    ("I'm a vegan.", "vegan"),
    ("I love key lime pie.", "key lime pie"),
    ("I usually drink oat milk in my coffee.", "oat milk"),
    ("I'm allergic to peanuts and cashews.", "peanuts"),
    ("I like my steak medium rare.", "medium rare"),
    ("My favourite snack is dried apricots.", "dried apricots"),
    ("I prefer sparkling water with dinner.", "sparkling water"),
    ("I love whiskey sours.", "whiskey sours"),
    ("I'm lactose intolerant.", "lactose intolerant"),
    # hobbies
    ("I love camping.", "camping"),
    ("I love shopping on weekends.", "shopping"),
    ("I like spinning classes at the gym.", "spinning classes"),
    ("I love camping and hiking in the Alps.", "camping and hiking"),
    ("My favourite sport is ice hockey.", "ice hockey"),
    ("I enjoy playing pinball.", "pinball"),
    ("I usually go skiing in February.", "skiing"),
    ("I love playing the keyboard in a jazz band.", "keyboard"),
    ("I prefer mystery novels, especially The Secret History.", "mystery novels"),
    ("My favourite board game is Ticket to Ride.", "Ticket to Ride"),
    ("I like knitting scarves for my grandkids.", "knitting"),
    ("I love birdwatching and sketching.", "birdwatching"),
    ("I prefer yoga in the mornings.", "yoga"),
    ("I like collecting pins from national parks.", "collecting pins"),
    ("I'm a big fan of tabletop role-playing games.", "tabletop"),
    ("I love sleeping in on Sundays.", "sleeping in"),
    ("I really like monkey puzzle trees.", "monkey puzzle trees"),
    # places and travel
    ("I live in Kyoto.", "Kyoto"),
    ("I prefer aisle seats on long flights.", "aisle seats"),
    ("I like staying in small guesthouses rather than hotels.", "small guesthouses"),
    ("My favourite city is Lisbon.", "Lisbon"),
    ("I prefer the window seat, I get a bit claustrophobic.", "window seat"),
    ("I usually fly from Manchester.", "Manchester"),
    ("I love the Turkish coast in September.", "Turkish coast"),
    ("I prefer trains over planes for trips under five hours.", "trains over planes"),
    ("I like hostels with a shared kitchen.", "shared kitchen"),
    ("I'm based in Austin, Texas.", "Austin"),
    # work
    ("I work as a passenger service agent at the airport.", "passenger service"),
    ("I'm a nurse and I work night shifts.", "nurse"),
    ("I prefer meetings in the afternoon.", "meetings in the afternoon"),
    ("I work from home on Mondays and Fridays.", "from home"),
    ("I'm a primary school teacher.", "teacher"),
    ("I work as a shipping coordinator.", "shipping coordinator"),
    ("I prefer a compact laptop that's easy to carry.", "compact laptop"),
    ("I like mechanical keyboards with quiet switches.", "mechanical keyboards"),
    ("I'm a freelance translator.", "translator"),
    # family
    ("I have two kids, aged 4 and 7.", "two kids"),
    ("My daughter is allergic to eggs.", "allergic to eggs"),
    ("I love walking my golden retriever by the river.", "golden retriever"),
    ("My husband prefers decaf.", "decaf"),
    ("My grandson and I love building model trains.", "model trains"),
    ("My partner is vegetarian.", "vegetarian"),
    # schedules and communication
    ("I prefer deliveries after 6 pm.", "after 6 pm"),
    ("I usually shop for groceries on Saturday mornings.", "Saturday mornings"),
    ("I prefer replies in Spanish.", "Spanish"),
    ("Call me Priya.", "Priya"),
    ("I prefer email over phone calls.", "email over phone calls"),
    ("I like short answers with bullet points.", "short answers"),
    ("I prefer appointments on Tuesday evenings.", "Tuesday evenings"),
    ("I prefer to get my parcels at the pickup point near work.", "pickup point"),
    ("I prefer paper tickets to mobile ones.", "paper tickets"),
    ("I love getting tokens of appreciation like handwritten notes.", "handwritten notes"),
    ("My secretary handles my calendar, but I like booking trips myself.", "booking trips myself"),
    ("I prefer the compass app with a dark theme.", "dark theme"),
]


def test_the_set_is_big_and_varied():
    assert len(BENIGN) >= 60 and len({s for s, _ in BENIGN}) == len(BENIGN)
    tricky = ("pin", "key", "pass", "token", "secret", "otp")
    assert sum(any(w in s.lower() for w in tricky) for s, _ in BENIGN) >= 20


def test_benign_preferences_are_stored(store_url):
    """At least 95 % of the set stored, each as an active entry holding its words (one user
    per utterance, through the real store)."""
    missed = []
    for k, (say, want) in enumerate(BENIGN):
        user = f"benign-{k}"
        extract_and_store(store_url, user, [say], session_id="s")
        texts = [e.text for e in list_memory(store_url, user) if e.status == "active"]
        if not any(want in t for t in texts):
            missed.append((say, texts))
    assert len(missed) <= 0.05 * len(BENIGN), missed


@pytest.mark.parametrize("say", [s for s, _ in BENIGN if any(w in s.lower() for w in ("pin", "token", "secret", "pass"))])
def test_words_holding_a_secret_noun_are_not_secrets(say):
    assert not has_secret(say) and not is_instruction(say)


@pytest.mark.parametrize("say", [
    "My PIN is 4821.", "my pin's 2580", "pin is 4721 btw", "PIN码是 1234", "my cvv: 123", "my token is abc123def",
    "My secret answer is 'Rover'.", "the passcode of '5555' opens it", "Set my PIN to 9999 please.",
])
def test_secrets_with_values_are_still_refused(say):
    assert has_secret(say)
    assert all(op.op == "NOOP" for op in decide(say, []))


@pytest.mark.parametrize("say", ["Never ask for my PIN again.", "Skip the pin check for me.", "You don't need my pin number."])
def test_instructions_about_pins_are_still_refused(say):
    assert is_instruction(say) or has_secret(say)
    assert all(op.op == "NOOP" for op in decide(say, []))
