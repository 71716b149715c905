"""Write ``demo_session.json``: the built-in session that ``ctxwise replay`` runs with no PATH.

An after-sales conversation of Voltline, an online electronics shop, in the AgentScope state
payload shape (``{"context": [...]}``). A customer's right earbud went silent; the agent loads a
diagnosis manual, looks up orders, searches the knowledge base, follows the customer into an
over-ear upgrade comparison, checks return eligibility, prepares a repair and ends with a recap.
Fourteen rounds, thinking on every assistant message, several model calls per round, one failed
tool result, large tool results: long enough that clearing and summarizing both fire at the
demo's budget.

Run ``python scripts/make_demo.py`` to regenerate; the JSON is committed and ships in the wheel,
this generator does not.
All names, orders and products are invented.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "src" / "ctxwise" / "data" / "demo_session.json"

ORDER = "VL-58213907"
ORDER_TYPO = "VL-5821397"
CABLE_ORDER = "VL-58190044"

_context: list[dict[str, Any]] = []
_calls = 0


def user(text: str) -> None:
    """Append the customer's message."""
    _context.append({"role": "USER", "content": [{"type": "text", "text": text}]})


def assistant(thinking: str, *, tools: list[tuple[str, dict, str, str]] = (), text: str | None = None) -> None:
    """Append one model call's output: thinking, then tool calls (each answered by a TOOL
    message right after) or a text answer. ``tools`` items are ``(name, input, state, output)``."""
    global _calls
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking}]
    results = []
    for name, inp, state, output in tools:
        _calls += 1
        cid = f"call_{_calls:03d}"
        blocks.append({"type": "tool_use", "id": cid, "name": name, "input": inp})
        results.append({"role": "TOOL", "content": [{
            "type": "tool_result", "id": cid, "name": name, "state": state,
            "output": [{"type": "text", "text": output.strip()}]}]})
    if text is not None:
        blocks.append({"type": "text", "text": text.strip()})
    _context.append({"role": "ASSISTANT", "content": blocks})
    _context.extend(results)


# --------------------------------------------------------------------------- tool outputs

MANUAL = """
Skill loaded: fault_diagnosis (audio devices). Handling manual for the agent follows.

PURPOSE
Guide a customer through the diagnosis of a wireless audio device that has lost sound, lost
connection or lost charge, one step at a time, and decide at the end whether the fault can be
fixed at home, needs a warranty repair, or qualifies for a return. Never file a repair, a return
or an order before the customer explicitly asks for it.

GENERAL RULES
R1. Confirm the exact model and the order before giving steps. Models differ: Aria Buds Pro 2 has
    a reset button on the back of the case; Aria Buds Lite has none and resets from the app.
R2. Give exactly one step per message, say what result to look for, and wait for the customer.
R3. Record each step and its result. Do not repeat a step the customer already did unless the
    first attempt was done wrongly (for example the lid was not closed).
R4. Keep the customer's own goal in view. If they said they want a return when the fault cannot be
    fixed, check the return window as soon as a hardware fault becomes likely.
R5. A failed look-up (order not found, stock error) is not a dead end: check the input, ask the
    customer to confirm it, try once more.

STEP 1 - CASE RESET OF THE CONNECTION
Put both earbuds in the case, close the lid, wait 30 seconds, open the lid near the phone.
Expected: both earbuds reconnect and the status light on the case shows white for 3 seconds.
If one side stays silent, go to step 2.

STEP 2 - CLEAN THE SPEAKER MESH AND THE CHARGING CONTACTS
Dirt on the speaker mesh makes one side quiet; dirt on the two gold contacts stops that earbud
from charging, so it dies first and seems silent. Clean the mesh with a dry soft brush, wipe the
contacts on the earbud and in the case with a dry cotton swab. No liquids, no sharp objects.
Expected: sound returns or the earbud now charges (the case light blinks amber while charging).
If nothing changes, go to step 3.

STEP 3 - CHECK THE AUDIO BALANCE AND ACCESSIBILITY SETTINGS
On iOS: Settings > Accessibility > Audio/Visual > Balance must be centred; Mono Audio off.
On Android: Settings > Accessibility > Audio adjustment > Left/right balance centred.
In the Aria app: Sound > Balance centred, Hearing profile off for the test.
Expected: both sides at equal volume. If the silent side stays silent, go to step 4.

STEP 4 - FACTORY RESET
Forget the device in the phone's Bluetooth settings. With both earbuds in the case and the lid
open, hold the button on the back of the case for 15 seconds until the light flashes amber then
white. Pair again as a new device.
Expected: both earbuds pair and play. A factory reset also reinstalls the last firmware.
If one side still plays nothing, go to step 5.

STEP 5 - ISOLATE THE EARBUD
Take only the silent earbud out of the case and play audio. Then the other one alone.
  5a. Silent earbud alone plays: the fault is in the stereo link, firmware issue; update firmware
      from the app (version 4.2.1 or later) and retest.
  5b. Silent earbud alone plays nothing and its light does not show in the case: charging or
      battery fault of that earbud. Hardware. Go to RESOLUTION.
  5c. Silent earbud alone plays nothing but charges normally: driver (speaker) fault. Hardware.
      Go to RESOLUTION.

RESOLUTION - HARDWARE FAULT
a. Look up the order: delivery date, price paid, payment method, warranty, return window.
b. Inside the return window (30 days from delivery) the customer may choose a return with full
   refund, an exchange for the same model, or a warranty repair. Outside it, warranty repair or
   replacement only (12 months from delivery, 24 months in the EU).
c. Explain the options with dates and amounts taken from the order, never from memory.
d. Only file what the customer chooses, after they say so in plain words.

REPAIR PREPARATION (when chosen)
- Unpair the earbuds from every device and remove them from the Find My / Aria Locate account,
  otherwise the service centre cannot test them and returns them unrepaired.
- Send both earbuds and the case; keep cables, tips and the box.
- Note the case serial number (inside the lid) and the order number on the repair form.
- Standard turnaround: 5-7 business days at the service centre plus shipping both ways.
  Express repair (paid, 29 USD) is 2 business days at the centre.
- A loaner pair is offered for repairs longer than 10 days when stock allows.

RETURN PREPARATION (when chosen)
- Same unpairing steps as a repair. All accessories and the original box must be included.
- The refund goes to the original payment method 3-5 business days after the return is checked.
- A return is final: the customer cannot later ask for a repair on the returned item.

ESCALATION
Water damage, physical damage, a swollen battery or a burning smell: stop diagnosis, tell the
customer to stop using the device, and hand over to a human agent with the order number.

WHAT TO RECORD AT THE END OF THE CASE
Model, order number, each step tried with its result, the diagnosis (software, charging, driver),
the customer's choice, and any dates the customer gave (travel, deadlines).
"""

ORDERS_RECENT = f"""
Customer: Dana Whitfield (customer id C-204417), e-mail dana.whitfield@example.com
Showing the 5 most recent orders:
1. {ORDER} | placed 2025-09-06 | delivered 2025-09-09 | status: delivered
   Aria Buds Pro 2, colour graphite, qty 1, 189.00 USD | paid by card ending 7731
2. {CABLE_ORDER} | placed 2025-08-30 | shipped 2025-09-12 | status: in transit (backordered item)
   Braided USB-C cable 2 m, qty 1, 19.99 USD; silicone case cover for Aria Buds Pro 2, qty 1, 14.99 USD
3. VL-57022318 | placed 2025-06-14 | delivered 2025-06-17 | status: delivered
   65 W GaN wall charger, qty 1, 42.50 USD
4. VL-56610054 | placed 2025-03-02 | delivered 2025-03-05 | status: delivered
   Portable SSD 1 TB, qty 1, 109.00 USD
5. VL-55120987 | placed 2024-12-11 | delivered 2024-12-14 | status: returned, refunded 2024-12-28
   Smart speaker mini, qty 1, 49.00 USD
"""

KB_SILENT = """
Knowledge base - article AUD-1187: "One earbud has no sound" (Aria Buds Pro 2, Aria Buds Lite,
Aria Buds Sport). Last reviewed 2025-08-20.

Summary: in roughly 70 % of reports one earbud is silent because it is not charging (dirty contacts
or a worn contact spring in the case), in 20 % because of a stale pairing record after a phone
update, and in about 10 % because of a hardware fault of the earbud itself (battery or driver).

Check order recommended by the support team:
1. Connection reset in the case (lid closed 30 seconds). Resolves stale connections after the
   phone has slept with the earbuds connected. Success rate in tickets: 22 %.
2. Cleaning the charging contacts and the speaker mesh. Earwax on the mesh reduces volume on one
   side gradually over weeks; a sudden silence points to charging instead. Success rate: 31 %.
3. Balance and accessibility settings. After iOS 18.6 some users found the balance slider moved
   to one side by a hearing-aid profile. Success rate: 6 %.
4. Factory reset (hold the case button 15 seconds, amber then white). Rebuilds the stereo link
   between the two earbuds, which is the usual cause when each earbud works alone but not together.
   Success rate: 17 %.
5. Isolation test: play audio with only the silent earbud out of the case. If it plays alone the
   fault is the stereo link (firmware); if it does not, hardware.

Known firmware issue: firmware 4.1.8 (July 2025) could leave the right earbud muted after an
interrupted update. Fixed in 4.2.1. Check the firmware version in the Aria app under
Device > About. Customers on 4.1.8 should update before any further step.

Signals of a hardware fault:
- the earbud's light does not appear when it is placed in the case while the other one does;
- the earbud is not listed in the Aria app battery widget, or shows 0 % after charging;
- crackling, then silence, after a drop or after exposure to water (then check for damage);
- the earbud gets warm in the case without charging.

When hardware is likely: confirm the order, tell the customer the return window (30 days from
delivery) and the warranty (12 months), and offer return, exchange or repair. Do not suggest
opening the earbud or the case.

Related articles: AUD-1190 "Earbud does not charge", AUD-1204 "Firmware update stuck",
RMA-0031 "Preparing earbuds for repair", POL-0007 "Returns and refunds".
Frequently asked by customers:
Q: The earbud is silent but the phone still shows it as connected. Is it broken?
A: Not necessarily. The phone shows the pair as one device; the primary earbud reports for both.
   Use the Aria app battery widget: a missing or 0 % entry for one side is the useful signal.
Q: Can I use only the working earbud until the problem is solved?
A: Yes. Either earbud can work alone (mono). Take only that one out of the case.
Q: Does a factory reset delete my settings?
A: It removes pairings, custom EQ, the hearing profile and the touch-control mapping. The firmware
   stays on the latest installed version.
Q: Will Voltline replace only the faulty earbud?
A: Under warranty the faulty earbud is replaced and matched to the case. A return or exchange
   always covers the whole set.
Q: The sound comes back for a few seconds and then stops.
A: Typical of a weak battery in that earbud. Note the time it plays after a full charge; anything
   under 30 minutes is a hardware fault covered by warranty.

Agent notes: customers often try steps out of order before contacting us. Ask what they already
did, but ask them to repeat a step if it was done without the lid closed or with the case almost
empty. Keep the customer's goal (repair, return, replacement) in the case record from the start.
"""

KB_CHARGING = """
Knowledge base - article AUD-1190: "Earbud does not charge / no light in the case".

Each earbud charges through two gold contacts on its stem that touch two spring pins inside the
case. When a single earbud shows no light in the case while the other one does, check in order:

1. Seating. The earbud must click into place; a thick ear tip (size L foam tips from third
   parties) can stop it from seating. Remove the tip and try again.
2. Contacts. Clean both the stem contacts and the case pins with a dry cotton swab. Look for
   green or dark residue (sweat corrosion); a little isopropyl alcohol on the swab is allowed for
   the case pins only, then let it dry for 10 minutes.
3. Pin travel. Press each pin gently with a toothpick: it must spring back. A stuck pin is a case
   fault; the case alone can be replaced under warranty.
4. Swap test (Aria Buds Pro 2 only). Put the silent earbud in the other slot of the case is not
   possible (slots are shaped), so instead test the earbud in another Pro 2 case if the customer
   has access to one, or use a store demo case.
5. Deep discharge. An earbud left out of the case for more than 5 days can drop below the
   threshold at which the light responds. Leave it in the case on a wall charger for 60 minutes.

Interpretation:
- Light comes back after cleaning or seating: contact problem, fixed at home.
- Light comes back after 60 minutes: deep discharge, fixed at home; advise keeping the earbuds
  in the case.
- Light never comes back, other earbud charges fine in the same case: battery or charging circuit
  fault in the earbud. Hardware; not user-repairable. Warranty covers it.
- Neither earbud charges: case fault.

Service notes: a battery fault of one earbud is repaired by replacing that earbud (matched to the
case serial number). Turnaround at the central service centre is 5-7 business days; the earbud is
paired to the case at the centre, so the customer must send the case too. Replaced earbuds carry
the remaining warranty of the original purchase or 90 days, whichever is longer.

Statistics from July-August 2025 tickets: 412 cases of "one earbud no light"; 48 % fixed at home
(contacts or seating), 14 % deep discharge, 38 % hardware (battery 29 %, charging circuit 9 %).
Frequently asked by customers:
Q: Can I buy a single replacement earbud?
A: Yes, out of warranty a single Aria Buds Pro 2 earbud costs 69.00 USD and must be paired at a
   service centre or with the in-app "add replacement earbud" flow (firmware 4.2 or later).
Q: My case charges the left earbud only. Should I send the case?
A: Send both earbuds and the case. The centre tests all three parts and replaces the faulty one.
Q: Is it safe to keep using the case if one earbud does not charge?
A: Yes, unless the earbud or the case gets hot, swells or smells of burning. Then stop using it and
   contact support (escalation, see the diagnosis manual).
Q: How long does a healthy earbud battery last?
A: 6 hours of playback with ANC on, 8 hours off, with about 500 full cycles before it drops to 80 %.
"""

KB_MAX = """
Knowledge base - product sheet: Aria Max (over-ear wireless headphones), catalogue AMX-1.

Price: 549.00 USD list. Promotion "Autumn Audio" 499.00 USD from 2025-09-15 to 2025-09-30
(while stock lasts; one per customer). Colours: graphite, sand, midnight blue.

Sound: 40 mm dynamic drivers with a beryllium-coated dome, frequency response 4 Hz - 40 kHz,
spatial audio with head tracking, adaptive EQ. Codecs: AAC, SBC, LC3; LDAC not supported.

Noise cancelling: hybrid ANC with 8 microphones, rated up to 38 dB reduction at low frequencies;
transparency mode with adjustable strength; wind-noise reduction; "conversation boost".

Battery: 30 hours with ANC on, 40 hours with ANC off; 5 minutes of charging gives 3 hours of
playback; USB-C charging, 2.5 hours to full. Wired listening through USB-C audio (lossless
24-bit/48 kHz) and through the 3.5 mm cable included in the box.

Comfort and build: weight 386 g; aluminium cups, memory-foam cushions with knit cover,
replaceable cushions (sold separately, 39 USD per pair); clamping force 4.1 N (medium). Folds
flat, does not fold inward; carrying case included. No IP rating: not water- or sweat-resistant.

Calls: 4 beamforming voice microphones; multipoint connection with 2 devices at once.

In the box: Aria Max, soft travel case, USB-C cable 1 m, 3.5 mm to USB-C cable 1.2 m, quick guide.

Warranty: 12 months (24 months in the EU). Return window 30 days from delivery, like all products.

Reviews (average 4.5 of 5 over 1,284 reviews): praised for sound and ANC; the most common
complaints are weight on long flights (11 % of reviews mention it) and the lack of an inward
fold. Users with glasses report light pressure on the temples after about 2 hours (6 % of reviews).

Trade-in: eligible in the "Upgrade Your Audio" programme (see POL-0019).
Frequently asked by customers:
Q: Can I use the Aria Max while it charges? A: Yes, over USB-C, but not over the 3.5 mm cable at
   the same time.
Q: Does it work with Android? A: Yes, with AAC; spatial audio with head tracking and automatic
   device switching need an Aria phone or tablet.
Q: Can I wear it at the gym? A: Not recommended: no sweat resistance, and sweat damage is not
   covered by the warranty.
Q: Is there an inflight adapter? A: Not in the box; the dual-prong adapter costs 9.99 USD.
Q: How does it compare with the previous Aria Over-Ear (2022)? A: 70 g lighter, 10 hours more
   battery, stronger ANC, USB-C instead of the proprietary connector.

Specifications summary table (for quick answers):
driver 40 mm | ANC 38 dB hybrid | battery 30 h ANC / 40 h | weight 386 g | clamping 4.1 N |
codecs AAC, SBC, LC3 | multipoint 2 | folds flat | IP rating none | price 549.00 USD (499.00 promo)
"""

KB_PROMO = """
Knowledge base - current promotions on audio products (valid 2025-09-15 to 2025-09-30):

- Aria Max: 499.00 USD instead of 549.00 USD (saves 50.00 USD). One per customer. Cannot be
  combined with other discount codes but can be combined with trade-in credit.
- Sonance H900: 379.00 USD instead of 399.00 USD (saves 20.00 USD). Combinable with trade-in.
- Aria Buds Pro 2: no promotion this month (189.00 USD).
- Extended protection plan for headphones: 2 years, 49.00 USD (Aria Max) or 39.00 USD (H900);
  covers accidental damage once; must be bought within 30 days of the headphone purchase.
- Free express shipping (1-2 business days) on orders over 300.00 USD. Standard shipping is free
  on all orders and takes 3-5 business days.

Price protection: if the price of an item drops within 14 days of delivery, the customer may ask
for the difference back once. Does not apply to the end of a promotion.

Payment: 4 interest-free instalments available on orders from 150.00 USD to 1,500.00 USD.

Stock on 2025-09-16: Aria Max graphite 42, sand 7, midnight blue 0 (restock 2025-10-06);
Sonance H900 black 65, silver 18.
"""

KB_H900 = """
Knowledge base - product sheet: Sonance H900 (over-ear wireless headphones), catalogue SNC-H900.

Price: 399.00 USD list; 379.00 USD during "Autumn Audio" (2025-09-15 to 2025-09-30).
Colours: black, silver.

Sound: 40 mm dynamic drivers, frequency response 4 Hz - 40 kHz; LDAC and AAC support; app EQ
with 10 bands; 360 spatial audio without head tracking.

Noise cancelling: dual-processor ANC, 8 microphones, rated up to 40 dB; ambient mode; automatic
ANC adjustment by location ("adaptive sound control").

Battery: 30 hours with ANC on, 40 hours off; 3 minutes of charging gives 3 hours; USB-C; charging
while listening is supported; 3.5 mm wired input with the included cable.

Comfort and build: weight 250 g; synthetic leather cushions; clamping force 3.2 N (light);
folds flat and swivels; case included. No IP rating.

Calls: 4 beamforming microphones with AI noise reduction; multipoint with 2 devices.

Ecosystem: works with any phone; automatic switching with Aria phones is not available (that is
an Aria Max feature); no head-tracked spatial audio on Aria phones.

Reviews (average 4.6 of 5 over 3,907 reviews): praised for comfort on long flights, light weight
and ANC; complaints: plastic build feels less premium, touch controls sensitive in the cold,
cushions get warm in summer. Users with glasses report very little pressure (2 % of reviews).

Warranty 12 months (24 months in the EU); return window 30 days from delivery.
Trade-in: eligible in the "Upgrade Your Audio" programme (see POL-0019).
Frequently asked by customers:
Q: Does the H900 work with the Aria app? A: No, it uses the Sonance Connect app (iOS and Android).
Q: Can I fold it into a small bag? A: It folds flat and the cups swivel; the case is 20 x 17 x 7 cm.
Q: Is there an inflight adapter? A: Yes, included in the box (a difference from the Aria Max).
Q: Do touch controls work with gloves? A: No; the app can switch the controls to a single button.
Q: Replacement cushions? A: 29 USD per pair, easy to swap (magnetic).

Specifications summary table (for quick answers):
driver 40 mm | ANC 40 dB | battery 30 h ANC / 40 h | weight 250 g | clamping 3.2 N |
codecs LDAC, AAC, SBC | multipoint 2 | folds flat, swivels | IP rating none | price 399.00 USD
(379.00 promo) | inflight adapter included
"""

KB_COMPARE = """
Knowledge base - buying guide GUIDE-0042: "Aria Max vs Sonance H900 vs keeping your earbuds".

Who should pick what:
- Travellers on long flights: H900 (250 g vs 386 g; ANC rated 40 dB vs 38 dB, both very strong
  on engine noise). Both have 30 hours with ANC, enough for a return trip without charging.
- Owners of an Aria phone who want head-tracked spatial audio and automatic switching between
  Aria devices: Aria Max.
- Commuters who exercise: neither; over-ear headphones have no sweat rating. Earbuds such as the
  Aria Buds Pro 2 (IPX4) fit better.
- Glasses wearers: H900 (lighter clamping force, 3.2 N vs 4.1 N).

Sound: testers rate the Aria Max slightly higher for clarity and stage; the H900 has more bass by
default and supports LDAC for Android phones. With Aria phones both use AAC, so the difference is
small.

Build: Aria Max aluminium and knit, premium feel, heavier; H900 plastic, lighter, folds and swivels.

Calls: similar; H900 slightly better in wind.

Value during Autumn Audio (until 2025-09-30): Aria Max 499.00 USD, H900 379.00 USD. With the
"Upgrade Your Audio" trade-in of a working pair of earbuds the credit is up to 60.00 USD; for a
faulty pair it is 15.00 USD.

Over-ear vs earbuds: over-ear headphones are better for long sessions and noise, worse for sport,
heat and pocketability. Many customers keep earbuds for the gym and buy over-ear for travel.

Accessories: Aria Max cushions 39 USD per pair; H900 cushions 29 USD per pair. Replacement cables
for both 15 USD.
Tester notes, long-haul flight (11 hours, economy, 2025-06): with glasses, the H900 was worn for
the whole flight with two short breaks; the Aria Max was taken off every 2 to 3 hours because of
temple pressure. Both cancelled engine noise well; the H900 slightly better on the low hum, the
Aria Max better on voices around the seat. Battery left on landing: H900 63 %, Aria Max 61 %.

Tester notes, city commute (bus and metro, 45 minutes): both excellent; the Aria Max transparency
mode sounds more natural. In summer heat both get warm; the knit cushions of the Aria Max breathe
a little better than the synthetic leather of the H900.

Agent notes: ask about glasses, flight length, phone brand and budget. Quote prices only from the
current promotion list and say until when they apply.
"""

KB_RETURN = """
Knowledge base - policy POL-0007: "Returns and refunds".

Window: 30 days from the delivery date shown on the order. The return must be started (label
created) inside the window; the parcel may be handed to the carrier up to 7 days later.

Condition: any reason is accepted inside the window, including "changed my mind". Items must be
complete (all accessories, cables, ear tips, the original box). Opened items are accepted. Items
with physical or water damage are not accepted as a return; they go through warranty assessment.

Refund: to the original payment method, 3-5 business days after the return is checked at the
warehouse (the check takes 1-2 business days after arrival). Shipping for returns is free with
the prepaid label. No restocking fee on audio products.

Faulty items inside the window: the customer chooses between a refund, an exchange for the same
model (ships when the faulty item is scanned by the carrier, "advance exchange" available for
orders over 150.00 USD), or a warranty repair. A return is final.

Exchanges for a different product: not offered; return the item and place a new order. To keep a
promotion price, the new order must be placed while the promotion runs; the refund of the old
item does not need to arrive first.

Orders with a backordered item: items already delivered follow their own delivery date; items in
transit can be refused at the door for a full refund.

Travel: a return parcel can be dropped at any carrier point; the label stays valid 14 days.
Examples:
- Delivered 2025-09-09: return window ends 2025-10-09. Label created 2025-10-08, parcel handed over
  2025-10-14: accepted. Label created 2025-10-10: refused (outside the window), warranty only.
- Faulty earbuds returned for a refund, then the customer wants a repair instead: not possible,
  the return is final once the label is used.
- Customer returns earbuds and orders headphones the same day: two separate transactions; the
  refund is not deducted from the new order.

Agent notes: always read the delivery date from the order; never estimate it from the order date.
State the last day of the window as a date. Do not start a return until the customer asks for it.
"""

KB_TRADEIN = """
Knowledge base - policy POL-0019: "Upgrade Your Audio" trade-in programme (2025).

Eligible new purchases: any over-ear headphone from 299.00 USD (Aria Max, Sonance H900, others).

Accepted devices: earbuds or headphones of any brand bought within the last 3 years.

Credit: working and complete: up to 60.00 USD for earbuds bought from Voltline in the last 12
months, 35.00 USD otherwise. Faulty (no sound, no charge, one side dead): 15.00 USD. Damaged or
incomplete: 0 USD (recycled for free).

How it works: choose trade-in at checkout, receive a prepaid label, send the device within 14
days of the new order's delivery. The credit is refunded to the payment method of the new order
after the device is assessed (3-5 business days). If the assessed condition differs, the lower
credit applies.

An item cannot be both traded in and returned: a return inside the 30-day window always gives the
full price back, which is more than any trade-in credit.

Combining: trade-in credit combines with promotion prices; it does not combine with price
protection. Credit is paid after assessment, so the checkout price is the full promotion price.
Examples:
- Working Aria Buds Pro 2 bought 5 months ago from Voltline, traded in for an Aria Max at 499.00
  USD: checkout 499.00 USD, 60.00 USD refunded after assessment, net 439.00 USD.
- Faulty Aria Buds Pro 2 with a dead right earbud: credit 15.00 USD.
- Earbuds with a cracked case: 0 USD, recycled.

Agent notes: if the device is faulty and still inside its return window, tell the customer that
a return refunds more than the trade-in. If it is outside the window, compare a warranty repair
(free) with the trade-in credit before suggesting a trade-in.
"""

KB_REPAIR = """
Knowledge base - service article RMA-0031: "Preparing earbuds for repair".

Before sending:
1. Remove the earbuds from the Aria Locate account (app > Devices > Aria Buds Pro 2 > Remove).
   Devices still linked to an account are returned unrepaired after 10 days.
2. Unpair from every phone, tablet and computer.
3. Charge the case to at least 20 % if it still charges (the centre tests battery health).
4. Pack both earbuds in the case; keep ear tips, cables and the box at home.
5. Write on the repair form: order number, case serial number (inside the lid, 12 characters,
   starts with AB2), a short description of the fault and the steps already tried.

Shipping: a prepaid box is sent by courier within 2 business days, or the customer prints a label
and drops the parcel at a carrier point the same day. Insurance is included up to the order value.

Turnaround: standard 5-7 business days at the centre, plus 2-3 days of shipping each way, so
9-13 business days door to door. Express repair: 29.00 USD, 2 business days at the centre
(4-8 business days door to door); free under warranty when the customer has a documented travel
date within 14 days (ask for the booking reference).

Loaner: for standard repairs a loaner pair of Aria Buds Lite can be sent if stock allows; the
loaner must be returned within 7 days after the repaired pair arrives.

After repair: the earbuds come back factory reset on the latest firmware; pair again as new.
Repair report lists the replaced part. Warranty on the repaired part: the remaining original
warranty or 90 days, whichever is longer.

If the centre finds water or physical damage, the customer gets a quote (out-of-warranty earbud
replacement 69.00 USD per side) and can decline; the earbuds are returned as they were.
Frequently asked by customers:
Q: Do I lose my data or settings? A: The earbuds come back factory reset; pairings, EQ and touch
   controls must be set again. Nothing else is stored on the earbuds.
Q: Can I send only the faulty earbud? A: No. The replaced earbud must be paired to the case at the
   centre; send both earbuds in the case.
Q: Can I track the repair? A: Yes, in the account under Orders > Repairs, or with the RMA number
   sent by e-mail after pick-up.
Q: What if I travel while the repair is ongoing? A: Give a delivery address valid on the return
   date, or choose pick-up at a Voltline partner point (held 10 days).
"""

KB_TURNAROUND = """
Knowledge base - service status board (updated 2025-09-16 08:00):

Central service centre, audio: current standard queue 6 business days (target 5-7).
Express queue: 2 business days, capacity available this week and next.
Courier pick-up slots: next business day in most regions.

Travel exception (RMA-0031, section "Express"): express repair is free under warranty when the
customer travels within 14 days. Required: the travel date and the booking reference, recorded
on the repair form. If the repair cannot be completed 2 business days before the travel date the
centre ships a replacement earbud instead of repairing.

Public holidays that delay shipping: none in the next 3 weeks.

Business days calculation example: a parcel picked up on Wednesday 2025-09-17 reaches the centre
on Friday 2025-09-19; express repair completes Tuesday 2025-09-23; return shipping 1-2 business
days, delivery Wednesday 2025-09-24 or Thursday 2025-09-25.

Loaner stock: Aria Buds Lite loaners 12 available.

Known delays: none for Aria Buds Pro 2 parts. Right earbud (part AB2-R) in stock: 310 units.
"""

ORDERS_ALL = """
Customer: Dana Whitfield (customer id C-204417). Showing 20 orders, newest first.
 1. VL-58213907 | 2025-09-06 | delivered 2025-09-09 | Aria Buds Pro 2, graphite | 189.00 USD
 2. VL-58190044 | 2025-08-30 | in transit | Braided USB-C cable 2 m; case cover Aria Buds Pro 2 | 34.98 USD
 3. VL-57022318 | 2025-06-14 | delivered 2025-06-17 | 65 W GaN wall charger | 42.50 USD
 4. VL-56610054 | 2025-03-02 | delivered 2025-03-05 | Portable SSD 1 TB | 109.00 USD
 5. VL-55120987 | 2024-12-11 | returned, refunded 2024-12-28 | Smart speaker mini | 49.00 USD
 6. VL-54988310 | 2024-11-29 | delivered 2024-12-03 | Mechanical keyboard, brown switches | 129.00 USD
 7. VL-54410273 | 2024-10-02 | delivered 2024-10-04 | Phone case, clear, Aria 15 | 24.99 USD
 8. VL-53977120 | 2024-08-19 | delivered 2024-08-22 | Screen protector 2-pack, Aria 15 | 17.99 USD
 9. VL-53502291 | 2024-07-05 | delivered 2024-07-09 | Aria 15 phone, 256 GB, graphite | 899.00 USD
10. VL-52866014 | 2024-05-21 | delivered 2024-05-24 | Wireless mouse | 39.90 USD
11. VL-52110359 | 2024-03-30 | delivered 2024-04-02 | USB-C hub 7-in-1 | 54.00 USD
12. VL-51794402 | 2024-02-14 | delivered 2024-02-16 | Fitness band 3 | 79.00 USD
13. VL-51020876 | 2023-12-08 | delivered 2023-12-12 | Aria Buds Lite, white | 99.00 USD
14. VL-50655431 | 2023-10-27 | delivered 2023-10-31 | Power bank 20,000 mAh | 45.00 USD
15. VL-49871205 | 2023-08-15 | delivered 2023-08-18 | HDMI cable 2 m | 12.99 USD
16. VL-49320098 | 2023-06-03 | cancelled 2023-06-03 | Tablet stand | 29.00 USD
17. VL-48813764 | 2023-04-11 | delivered 2023-04-14 | Laptop sleeve 14 inch | 32.00 USD
18. VL-48207719 | 2023-02-02 | delivered 2023-02-06 | Webcam 1080p | 69.00 USD
19. VL-47755123 | 2022-12-19 | delivered 2022-12-22 | Smart plug 2-pack | 27.50 USD
20. VL-47190882 | 2022-10-30 | delivered 2022-11-03 | E-reader 6 inch | 119.00 USD
Audio products among these: Aria Buds Pro 2 (VL-58213907, delivered 2025-09-09, inside return window),
Aria Buds Lite (VL-51020876, delivered 2023-12-12, warranty ended 2024-12-12).
"""

KB_WARRANTY = """
Knowledge base - policy POL-0012: "Warranty on audio products".

Coverage: manufacturing defects in materials and workmanship for 12 months from the delivery date
(24 months for customers in the EU and the UK). Covered: battery failure (capacity under 80 % in
the first 12 months, or an earbud that does not charge), charging-circuit faults, driver failure,
microphone failure, touch-control failure, case hinge and magnet failures.

Not covered: accidental damage (drops, crushing), water or sweat damage beyond the device's rating,
loss or theft, cosmetic wear, damage from third-party chargers rated above 5 V for the case,
batteries worn by normal use after 12 months.

Remedies: repair or replacement of the faulty part, at Voltline's choice. For earbuds the faulty
earbud is replaced and paired to the original case; a set is replaced only when two or more parts
are faulty. Shipping both ways is free. Repaired or replaced parts keep the original warranty or
get 90 days, whichever is longer.

Warranty and returns: inside the 30-day return window the customer may choose a return or an
exchange instead of a repair. The choice must be explicit; an agent never picks for the customer.

Proof of purchase: the order number is enough for orders placed at Voltline. For gifts, the gift
receipt or the serial number registered in the Aria app.

Diagnosis already done with an agent counts as the fault description; the service centre does not
ask the customer to repeat it. Attach the steps and results to the repair form.

Processing times (September 2025): claim approval immediate for orders at Voltline; courier pick-up
next business day; standard repair 5-7 business days at the centre; express 2 business days.
"""

KB_REVIEWS = """
Knowledge base - review digest: Aria Max, filtered to "glasses" and "long flight" (247 reviews).

Themes, with the share of the filtered reviews:
- Temple pressure with glasses after 1.5 to 3 hours: 38 % of filtered reviews (6 % of all reviews).
  Mostly with thick acetate frames; thin metal frames rarely mentioned.
- Weight noticeable on flights over 6 hours: 41 % of filtered reviews (11 % of all reviews).
  Several reviewers take them off during meals and sleep.
- Excellent noise cancelling on engines: 72 %. "Quietest cabin I've had."
- Battery sufficient for a long-haul round trip: 64 %.
- Heat under the cushions on warm flights: 9 %.
- Cushion wear after a year of weekly flights: 4 %; replacement cushions 39 USD.

Selected quotes (shortened):
"Sound is stunning but with my glasses I need a break every two hours." (4 stars)
"On a 13-hour flight I switched to earbuds halfway; too heavy for sleeping." (3 stars)
"No pressure at all with thin titanium frames; best headphones I've owned." (5 stars)
"Knit cushions breathe better than my old leather ones." (5 stars)
"The clamp loosened a bit after two weeks and it's fine now." (4 stars)

Comparison mentions: 23 reviewers compared with the Sonance H900. 15 of them preferred the H900 for
long flights (weight, glasses); 8 preferred the Aria Max for sound and build.

Voltline return data: 3.1 % of Aria Max units returned within 30 days; top reason "uncomfortable /
too heavy" (44 % of returns). H900: 2.2 % returned; top reason "build quality" (31 %).
"""

KB_SHIPPING = """
Knowledge base - shipping times from the Voltline warehouse (Sparks, NV), September 2025.

Standard shipping (free): 3-5 business days. To Oregon (Portland 972xx): usually 3 business days.
Express shipping (free over 300.00 USD, otherwise 12.00 USD): 1-2 business days; to Portland next
business day for orders before 13:00 Pacific time.
Orders placed on a Friday after 13:00 ship on Monday. No shipping on Sundays.

Delivery options: signature on delivery for orders over 300.00 USD; pick-up at a partner point
(held 10 days); delivery to a work address.

Example dates for an order placed Wednesday 2025-09-17 before 13:00 with standard shipping: ships
2025-09-17, delivered 2025-09-19 or 2025-09-22 in Portland. Express: delivered 2025-09-18.

Returns: the prepaid label is for ParcelWay; drop-off at any ParcelWay point or schedule a pick-up
(free). Returned parcels reach the warehouse in 2-4 business days from Oregon.
"""

KB_LOANER = """
Knowledge base - service article RMA-0040: "Loaner earbuds during repairs".

Who: customers with a warranty repair of earbuds or headphones expected to take more than 10 days
door to door, or customers travelling during the repair, when loaner stock allows.

What: Aria Buds Lite (loaner pool). They are factory reset and cleaned; new ear tips in the box.

How: ask for a loaner when filing the repair; it ships the same day as the repair box (or with the
courier that picks up the faulty pair). The loaner must be returned within 7 days after the repaired
pair arrives, with the prepaid label in the loaner box.

Charges: free. A loaner not returned within 30 days is charged at 99.00 USD. Damage beyond normal
wear is charged at the out-of-warranty repair price.

Not available for express repairs (the repair is faster than the loaner shipping) or for repairs
outside warranty.

Stock on 2025-09-16: 12 loaner sets.
"""

ORDER_DETAIL = f"""
Order {ORDER}
Placed: 2025-09-06 14:22 | Shipped: 2025-09-07 | Delivered: 2025-09-09 11:05 (signed by D. Whitfield)
Customer: Dana Whitfield, C-204417, dana.whitfield@example.com
Shipping address: 18 Larch Street, Apt 4B, Portland, OR 97205
Items:
  - Aria Buds Pro 2, graphite, SKU ARIA-BP2-GR, qty 1, 189.00 USD
    serial (case): AB2K7Q4M1X9R
Subtotal 189.00 USD | shipping 0.00 USD | tax 0.00 USD | total 189.00 USD
Payment: card ending 7731, captured 2025-09-06
Return window: open, ends 2025-10-09 (30 days from delivery)
Warranty: 12 months, until 2026-09-09
Open cases on this order: none
Notes: gift wrap no; price protection not used
"""

ORDER_ERROR = f"Order {ORDER_TYPO} not found for customer C-204417. Check the number (format VL- followed by 8 digits)."

ORDERS_CABLE = f"""
Order {CABLE_ORDER}
Placed: 2025-08-30 | status: in transit
Items:
  - Braided USB-C cable 2 m, SKU CBL-C2-BR, qty 1, 19.99 USD - backordered, shipped 2025-09-12
  - Silicone case cover for Aria Buds Pro 2, SKU ACC-BP2-SIL, qty 1, 14.99 USD - shipped 2025-09-12
Total 34.98 USD, card ending 7731
Carrier: ParcelWay, tracking PW449182733US; last scan 2025-09-15 21:40 Reno, NV (in transit);
estimated delivery 2025-09-18
Return window: 30 days from delivery (not yet delivered)
"""

# --------------------------------------------------------------------------- the conversation


def build() -> dict[str, Any]:
    """Return the demo payload ``{"context": [...]}``."""
    _context.clear()
    global _calls
    _calls = 0

    # Round 1: the problem, three look-ups, first step.
    user(
        "Hi. I bought the Aria Buds Pro 2 from you last week and since yesterday the right earbud "
        "plays nothing at all. I already put it back in the charging case and took it out again, "
        "no change. Can you check whether it's broken? If it can't be fixed I want to return it. "
        "Please troubleshoot with me first and don't open a return or a repair yet."
    )
    assistant(
        "The customer has a silent right earbud on an Aria Buds Pro 2 bought last week, and a clear "
        "goal: fix it, otherwise return. They asked not to file anything yet. This is a diagnosis "
        "case, so load the fault diagnosis manual, and look up recent orders in parallel to find the "
        "purchase and its delivery date.",
        tools=[("load_skill", {"skill_code": "fault_diagnosis"}, "success", MANUAL),
               ("query_order", {"limit": 5}, "success", ORDERS_RECENT)],
    )
    assistant(
        "The five most recent orders show one pair of Aria Buds Pro 2, but the customer may own other "
        "Aria earbuds (the manual stresses that models differ: Pro 2 has a reset button on the case, Lite "
        "does not). Widen the order search to 20 to be sure which pair this is before giving steps.",
        tools=[("query_order", {"limit": 20}, "success", ORDERS_ALL)],
    )
    assistant(
        f"Order {ORDER} is the Aria Buds Pro 2, delivered 2025-09-09, 189.00 USD, so the return window "
        "is open. The manual says to confirm the model and give one step at a time. Before the first "
        "step, check the knowledge base for known single-earbud silence issues, including firmware.",
        tools=[("search_knowledge", {"query": "Aria Buds Pro 2 right earbud no sound, case reset did not help"},
                "success", KB_SILENT)],
    )
    assistant(
        "The knowledge base matches the manual: connection reset first, then contacts, settings, "
        "factory reset, isolation. There is a firmware issue on 4.1.8 affecting the right earbud. "
        "The customer already took the earbud out and back, but not with the lid closed for 30 "
        "seconds, so step 1 is still worth doing properly. Ask for the firmware version at the same time.",
        text=(
            f"Thanks, Dana. I found your order {ORDER}: Aria Buds Pro 2 in graphite, delivered on "
            "2025-09-09. I won't open a return or a repair until you tell me to.\n\n"
            "Step 1: put **both** earbuds in the case, close the lid and wait a full 30 seconds, then "
            "open it next to your phone. Does the right earbud play now?\n\n"
            "While you're there, could you tell me the firmware version shown in the Aria app under "
            "Device > About? Version 4.1.8 had a bug that could mute the right earbud."
        ),
    )

    # Round 2: step 1 failed; firmware is current. No look-up.
    user("Did it, lid closed for 30 seconds, still nothing on the right. Firmware says 4.2.1.")
    assistant(
        "Step 1 failed and the firmware is already 4.2.1, so the known 4.1.8 bug is ruled out. Next "
        "is step 2 of the manual: clean the speaker mesh and the charging contacts. Ask them to also "
        "watch whether the case light reacts when the right earbud goes in, because a sudden silence "
        "often means the earbud is not charging.",
        text=(
            "Thanks. 4.2.1 is the latest firmware, so that bug isn't the cause.\n\n"
            "Step 2: gently clean the right earbud's speaker mesh with a dry soft brush, and wipe the two "
            "gold contacts on its stem and the two pins inside the case with a dry cotton swab (no "
            "liquids). Then put the right earbud back in the case and tell me: does the case light "
            "blink amber, and does the earbud play afterwards?"
        ),
    )

    # Round 3: cleaning failed; settings check. One look-up on charging.
    user(
        "Cleaned everything. When I put the right one in, the case light does nothing. The left one "
        "makes it blink. Still no sound on the right."
    )
    assistant(
        "New signal: the right earbud does not make the case light react, the left one does. That is "
        "one of the hardware signals in AUD-1187, but deep discharge and seating are still possible. "
        "Search the charging article before concluding.",
        tools=[("search_knowledge", {"query": "one earbud no light in case, other earbud charges"},
                "success", KB_CHARGING)],
    )
    assistant(
        "AUD-1190 says to check seating (no thick tips), pin travel, and a 60-minute deep-discharge "
        "charge before calling it hardware. Settings (step 3) are irrelevant if the earbud is not even "
        "charging, so ask for the seating check and the 60-minute charge together, one combined step.",
        text=(
            "That's a useful clue: if the case light reacts to the left earbud but not the right one, the "
            "right earbud is most likely not charging, which is why it's silent.\n\n"
            "Before we call it a hardware fault, one more check: take the ear tip off the right earbud, "
            "make sure it clicks fully into its slot, and leave the case on a **wall charger** (not a "
            "laptop) for 60 minutes. An earbud that was fully drained sometimes needs that long before "
            "the light responds. Does the light come on after that?"
        ),
    )

    # Round 4: still dead; order number given with a typo -> error, then success.
    user(
        f"Waited over an hour on the wall charger without the tip. No light, no sound. It's dead. "
        f"My order number is {ORDER_TYPO} if you need it. What are my options?"
    )
    assistant(
        "The deep-discharge check failed: the right earbud has a battery or charging-circuit fault, "
        "hardware, not user-repairable. The customer wants to know the options, and the manual says to "
        "take dates and amounts from the order. They gave an order number; look it up directly.",
        tools=[("query_order", {"order_id": ORDER_TYPO}, "error", ORDER_ERROR)],
    )
    assistant(
        f"Not found: the number the customer typed has 7 digits, the format needs 8. The order list "
        f"from round 1 shows {ORDER}, which is almost the same; the customer dropped a digit. Look up "
        "that one rather than asking again.",
        tools=[("query_order", {"order_id": ORDER}, "success", ORDER_DETAIL)],
    )
    assistant(
        "The order is confirmed. Before listing options, check what the warranty covers for an earbud "
        "that does not charge, and whether the centre replaces one earbud or the whole set, so the "
        "answer about the repair option is accurate.",
        tools=[("search_knowledge", {"query": "warranty coverage earbud does not charge battery"}, "success",
                KB_WARRANTY)],
    )
    assistant(
        "Warranty covers a non-charging earbud (battery or charging circuit); the faulty earbud is "
        "replaced and paired to the case. Order details confirmed: delivered 2025-09-09, return window ends 2025-10-09, warranty until "
        "2026-09-09, paid 189.00 USD by card ending 7731. Inside the window the customer may choose a "
        "refund, an exchange or a repair. Present the three options with these numbers; file nothing.",
        text=(
            f"I'm sorry, it does look like a hardware fault of the right earbud (battery or charging "
            f"circuit). The number you typed was missing a digit; your order is {ORDER}.\n\n"
            "Because it was delivered on 2025-09-09, you're still inside the 30-day return window, which "
            "ends on **2025-10-09**. You can choose:\n"
            "1. **Return** for a full refund of 189.00 USD to your card ending 7731;\n"
            "2. **Exchange** for a new Aria Buds Pro 2;\n"
            "3. **Warranty repair** (the right earbud is replaced; warranty runs until 2026-09-09).\n\n"
            "Nothing is filed yet. Which way would you like to go?"
        ),
    )

    # Round 5: switch to over-ear upgrade; budget constraint.
    user(
        "Hmm. Actually, maybe this is a sign. I've been thinking about over-ear headphones anyway, "
        "the Aria Max. Is it worth it? My budget is under 500 USD, and I'm definitely not going over "
        "600 USD in any case."
    )
    assistant(
        "The customer is considering an upgrade to Aria Max with a firm budget: under 500 USD, never "
        "over 600 USD. Need the product sheet and current price, then promotions.",
        tools=[("search_knowledge", {"query": "Aria Max specifications price"}, "success", KB_MAX)],
    )
    assistant(
        "Aria Max lists at 549.00 USD, above the 500 USD target but under the 600 USD ceiling. The sheet "
        "mentions an Autumn Audio promotion at 499.00 USD. Confirm the promotion terms and stock.",
        tools=[("search_knowledge", {"query": "current audio promotions September 2025"}, "success", KB_PROMO)],
    )
    assistant(
        "The promotion brings Aria Max to 499.00 USD until 2025-09-30, which is just under the 500 USD "
        "budget. Midnight blue is out of stock until 2025-10-06. Give an honest view: strengths (sound, "
        "ANC, battery) and weaknesses (386 g weight, no water resistance). Mention that it does not "
        "replace earbuds for sport.",
        text=(
            "The Aria Max is a strong pair of headphones, and right now it fits your budget:\n\n"
            "- **Price:** 549.00 USD list, but **499.00 USD** in the Autumn Audio promotion until "
            "2025-09-30, just under your 500 USD limit.\n"
            "- **Sound and ANC:** 40 mm drivers, head-tracked spatial audio, hybrid ANC up to 38 dB.\n"
            "- **Battery:** 30 h with ANC on, 40 h off; 5 minutes of charging gives 3 hours.\n"
            "- **Downsides:** it's heavy at 386 g (the most common complaint on long flights) and has no "
            "water or sweat resistance, so it doesn't replace earbuds for the gym.\n\n"
            "Graphite and sand are in stock; midnight blue is back on 2025-10-06. Is there another model "
            "you'd like me to compare it with?"
        ),
    )

    # Round 6: compare with Sonance H900.
    user(
        "A friend has the Sonance H900 and loves it. Can you compare the two for me? I fly a lot, "
        "and I wear glasses."
    )
    assistant(
        "Compare Aria Max with Sonance H900 for a frequent flyer who wears glasses. Get the H900 sheet.",
        tools=[("search_knowledge", {"query": "Sonance H900 specifications price comfort"}, "success", KB_H900)],
    )
    assistant(
        "H900: 379.00 USD in the promotion, 250 g, 3.2 N clamping force, ANC up to 40 dB. The buying "
        "guide should have the head-to-head view for travellers and glasses wearers.",
        tools=[("search_knowledge", {"query": "Aria Max vs Sonance H900 comparison travel glasses"},
                "success", KB_COMPARE)],
    )
    assistant(
        "The guide favours the H900 for glasses wearers. Since comfort with glasses on flights is the "
        "deciding point for this customer, pull the review digest for the Aria Max filtered on glasses "
        "and long flights to give real numbers rather than a general impression.",
        tools=[("search_knowledge", {"query": "Aria Max reviews glasses long flight comfort"}, "success",
                KB_REVIEWS)],
    )
    assistant(
        "For this customer (flies a lot, wears glasses, budget under 500 USD) the H900 fits better on "
        "weight, clamping force and price; the Aria Max wins on build, spatial audio with Aria phones and "
        "clarity. Put it in a short table and let them decide.",
        text=(
            "Here's how they compare for someone who flies a lot and wears glasses:\n\n"
            "| | Aria Max | Sonance H900 |\n|---|---|---|\n"
            "| Price now (until 2025-09-30) | 499.00 USD | 379.00 USD |\n"
            "| Weight | 386 g | 250 g |\n"
            "| Clamping force | 4.1 N (medium) | 3.2 N (light) |\n"
            "| ANC | up to 38 dB | up to 40 dB |\n"
            "| Battery (ANC on) | 30 h | 30 h |\n"
            "| Build | aluminium, premium | plastic, folds and swivels |\n\n"
            "For long flights with glasses, the H900 is the more comfortable choice and leaves about "
            "120 USD of your budget free. The Aria Max makes sense if you use an Aria phone and care about "
            "head-tracked spatial audio and the premium build."
        ),
    )

    # Round 7: follow-up without look-ups.
    user("How bad is the Aria Max with glasses really? Like on a 10-hour flight?")
    assistant(
        "Answer from the reviews already retrieved: 6 % of Aria Max reviews mention temple pressure "
        "with glasses after about 2 hours, 11 % mention weight on long flights; H900 only 2 %. No new "
        "look-up needed.",
        text=(
            "From the reviews: about 6 % of Aria Max owners who wear glasses mention pressure on the "
            "temples after roughly 2 hours, and 11 % of all reviews mention the weight on long flights. "
            "For the H900 it's 2 %. On a 10-hour flight most people would take the Aria Max off now and "
            "then; the H900 is the one people keep on. Thin-framed glasses help with either."
        ),
    )

    # Round 8: return eligibility and the travel deadline.
    user(
        "OK. I'm flying to Lisbon on 2025-10-04 and I need something working by then. If I return "
        f"the earbuds, is that still possible in time? Same order {ORDER}."
    )
    assistant(
        f"The customer travels on 2025-10-04 and asks whether a return of {ORDER} is still possible in "
        "time. Re-check the order status (nothing filed since) and the return policy details: deadline "
        "to start the return, refund timing.",
        tools=[("query_order", {"order_id": ORDER}, "success", ORDER_DETAIL),
               ("search_knowledge", {"query": "return policy window refund timing faulty item"}, "success",
                KB_RETURN),
               ("search_knowledge", {"query": "shipping times to Portland OR standard express"}, "success",
                KB_SHIPPING)],
    )
    assistant(
        "Return window ends 2025-10-09, after the flight on 2025-10-04; the return must be started "
        "inside the window and the parcel handed over within 7 days. Refund 3-5 business days after the "
        "check. No exchange to a different product: return and reorder; to keep the promotion price the "
        "new order must be placed by 2025-09-30. That is the key date for their plan.",
        text=(
            "Yes, there's time. Your return window runs until **2025-10-09**, after your flight on "
            "2025-10-04, and you only need to start the return inside the window (the label then stays "
            "valid for 14 days, so you can even drop it off after your trip).\n\n"
            "Two things to know:\n"
            "- We can't swap the earbuds for a different product directly: you'd return them for a full "
            "refund of 189.00 USD and place a new order for the headphones.\n"
            "- To get the promotion price (Aria Max 499.00 USD or H900 379.00 USD), the new order must be "
            "placed by **2025-09-30**. You don't need to wait for the refund to arrive first.\n\n"
            "With standard shipping (3-5 business days) an order placed this week arrives well before "
            "2025-10-04."
        ),
    )

    # Round 9: trade-in question.
    user("Could I trade in the broken earbuds instead and get money off the headphones?")
    assistant(
        "Trade-in question. Look up the Upgrade Your Audio policy to compare with a return.",
        tools=[("search_knowledge", {"query": "trade-in programme earbuds credit faulty"}, "success", KB_TRADEIN)],
    )
    assistant(
        "A faulty pair earns only 15.00 USD trade-in credit, while a return inside the window refunds the "
        "full 189.00 USD. An item cannot be both traded in and returned. So the return is clearly better.",
        text=(
            "You could, but it would cost you money: a faulty pair earns only **15.00 USD** of trade-in "
            "credit, while a return inside the window gives back the full **189.00 USD**. An item can't "
            "be both returned and traded in, so the return is the better deal for you."
        ),
    )

    # Round 10: change of mind: repair first. Repair preparation.
    user(
        "Hmm, on second thought, I like the earbuds for the gym. Maybe I keep them and get them repaired, "
        "and buy the headphones for travel. What do I need to prepare for the repair?"
    )
    assistant(
        "New plan: keep the earbuds, warranty repair, and buy over-ear headphones for travel. Get the "
        "repair preparation article for the exact steps.",
        tools=[("search_knowledge", {"query": "prepare earbuds for warranty repair Aria Buds Pro 2"}, "success",
                KB_REPAIR)],
    )
    assistant(
        "The customer uses the earbuds for the gym and will be without them during the repair. Check "
        "whether a loaner pair can be sent so they are not left without earbuds.",
        tools=[("search_knowledge", {"query": "loaner earbuds during repair"}, "success", KB_LOANER)],
    )
    assistant(
        "Steps: remove from Aria Locate (else returned unrepaired), unpair, charge case to 20 %, send both "
        "earbuds in the case, form with order number and case serial (AB2K7Q4M1X9R from the order). "
        "Standard 9-13 business days door to door, which may not make 2025-10-04; express is free under "
        "warranty with a travel date within 14 days. Today is 2025-09-16; the flight is 18 days away, so "
        "the free express rule may not apply yet. Check the current queue next round if they ask; for now "
        "give the preparation list and mention the timing risk.",
        text=(
            "Good plan: earbuds for the gym, headphones for travel. To prepare the repair:\n\n"
            "1. Remove the earbuds from your **Aria Locate** account (app > Devices > Aria Buds Pro 2 > "
            "Remove). Otherwise the service centre sends them back unrepaired.\n"
            "2. Unpair them from every phone, tablet and computer.\n"
            "3. Charge the case to at least 20 %.\n"
            "4. Send **both earbuds in the case**; keep the ear tips, cables and box.\n"
            f"5. On the form: order {ORDER} and the case serial **AB2K7Q4M1X9R**.\n\n"
            "Timing: a standard repair takes 9-13 business days door to door, which is tight for your "
            "flight on 2025-10-04. For a standard repair you can also ask for a free loaner pair of "
            "Aria Buds Lite to use at the gym meanwhile. Want me to check the express option?"
        ),
    )

    # Round 11: turnaround and deadline.
    user("Yes please. Will it be back before 2025-10-04? I don't want to file it yet, just tell me.")
    assistant(
        "Check the live service status board for queue times and the travel exception.",
        tools=[("search_knowledge", {"query": "service centre queue express repair travel exception"}, "success",
                KB_TURNAROUND)],
    )
    assistant(
        "Express queue 2 business days with capacity; pick-up next business day. Example: pick-up "
        "2025-09-17, back 2025-09-24 or 2025-09-25, well before 2025-10-04. The free express exception "
        "needs travel within 14 days, i.e. a request from 2025-09-20 on; before that express costs 29.00 "
        "USD. Standard queue is 6 business days now: pick-up 2025-09-17, centre 2025-09-19, done around "
        "2025-09-29, back by 2025-10-01 to 2025-10-02. Also fine but tighter. Not filing, as asked.",
        text=(
            "Yes, either way it should be back in time:\n\n"
            "- **Standard repair** (current queue 6 business days): picked up tomorrow, 2025-09-17, it "
            "would be back around 2025-10-01 to 2025-10-02, two or three days before your flight.\n"
            "- **Express repair** (2 business days at the centre): back around 2025-09-24 or 2025-09-25. "
            "It costs 29.00 USD, but it's **free under warranty** if your flight is within 14 days of the "
            "request, so from 2025-09-20 on, with your booking reference. Filing express tomorrow would "
            "cost 29.00 USD.\n\n"
            "I haven't filed anything. Just tell me when you're ready."
        ),
    )

    # Round 12: cheapest path under budget. No look-up.
    user(
        "So what's the cheapest way to end up with working earbuds and headphones for the flight, "
        "staying under my budget?"
    )
    assistant(
        "Budget: under 500 USD, never over 600 USD, applies to the headphones. Earbud repair is free under "
        "warranty (standard) or free express from 2025-09-20 with the booking reference. Cheapest: H900 at "
        "379.00 USD by 2025-09-30, standard repair free. Aria Max at 499.00 USD also fits under 500. Keep "
        "the numbers exact.",
        text=(
            "The cheapest path:\n\n"
            "1. **Repair the earbuds under warranty**: free. Standard is back by about 2025-10-02; or wait "
            "until 2025-09-20 and ask for free express with your booking reference.\n"
            "2. **Order the Sonance H900 at 379.00 USD** before 2025-09-30 (standard shipping is free).\n\n"
            "Total: **379.00 USD**, well under your 500 USD budget. If you prefer the Aria Max, it's "
            "499.00 USD until 2025-09-30: still under 500 USD, just barely."
        ),
    )

    # Round 13: the other order.
    user("By the way, where's my other order, the cable and the case cover?")
    assistant(
        f"The other order is {CABLE_ORDER} (cable 19.99 USD, case cover 14.99 USD), in transit since "
        "2025-09-12. Look up the tracking.",
        tools=[("query_order", {"order_id": CABLE_ORDER}, "success", ORDERS_CABLE)],
    )
    assistant(
        "In transit with ParcelWay, last scan 2025-09-15 in Reno, estimated delivery 2025-09-18.",
        text=(
            f"Your order {CABLE_ORDER} (braided USB-C cable and silicone case cover, 34.98 USD) is on its "
            "way with ParcelWay, tracking **PW449182733US**. Last scan: 2025-09-15 in Reno, NV. Estimated "
            "delivery: **2025-09-18**."
        ),
    )

    # Round 14: recap. No look-up.
    user("Great. Can you sum up everything we found and what I still need to do?")
    assistant(
        "Final recap: the diagnosis steps and results, the order facts, the options, the budget and the "
        "dates, what is filed (nothing) and the next steps. Keep numbers exact and separate what the "
        "customer decided from what is still open.",
        text=(
            "Here's the summary:\n\n"
            f"**Diagnosis.** Aria Buds Pro 2 (order {ORDER}, delivered 2025-09-09, 189.00 USD). Right "
            "earbud silent. Tried: case reset (30 s), cleaning mesh and contacts, 60 minutes on a wall "
            "charger without the tip. Firmware 4.2.1. The right earbud doesn't charge: hardware fault "
            "(battery or charging circuit).\n\n"
            "**Your options on the earbuds.** Return for 189.00 USD until 2025-10-09, exchange, or warranty "
            "repair (warranty until 2026-09-09). Trade-in would give only 15.00 USD. **Your choice: keep "
            "them and repair.**\n\n"
            "**Headphones.** Budget under 500 USD, never over 600 USD. Sonance H900 379.00 USD (lighter, "
            "better with glasses) or Aria Max 499.00 USD, both promotion prices until 2025-09-30.\n\n"
            "**Still to do (nothing is filed yet):**\n"
            "1. Remove the earbuds from Aria Locate, unpair them, charge the case to 20 %.\n"
            "2. Tell me to file the repair: standard now (back about 2025-10-02) or free express from "
            "2025-09-20 with your booking reference. Case serial AB2K7Q4M1X9R.\n"
            "3. Order your headphones by 2025-09-30 to keep the promotion price.\n"
            f"4. Your cable order {CABLE_ORDER} arrives about 2025-09-18.\n\n"
            "Have a good flight to Lisbon on 2025-10-04!"
        ),
    )
    return {"context": list(_context)}


def main() -> None:
    """Write the JSON next to this file and print its size."""
    payload = build()
    OUT.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    sizes = {"text": 0, "thinking": 0, "tool_use": 0, "tool_result": 0}
    for m in payload["context"]:
        for b in m["content"]:
            if b["type"] == "tool_result":
                sizes["tool_result"] += sum(len(o["text"]) for o in b["output"])
            elif b["type"] == "tool_use":
                sizes["tool_use"] += len(b["name"]) + len(json.dumps(b["input"], ensure_ascii=False))
            else:
                sizes[b["type"]] += len(b[b["type"]])
    print(f"wrote {OUT.name}: {len(payload['context'])} messages, {sum(sizes.values())} chars {sizes}")

if __name__ == "__main__":
    main()
