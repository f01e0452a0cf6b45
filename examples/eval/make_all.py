#!/usr/bin/env python3
"""Regenerate every data file of this example folder, as Rasa's Mantle engine
and its `evaluate_agent` command would have written them.

The conversations are described once, below, in a compact form (one tuple per
recorded event, with its offset in seconds from the session start). This
script expands them mechanically into what the engine really emits
(the README's "Event format"), deterministically (seeded; the same bytes on every run):

- `events/<scenario>.jsonl`: the ProtoJSON lines of the conversations run for
  that scenario (file stem = scenario file stem), one conversation after the
  other; `events/all.jsonl`: all of them interleaved by timestamp, each
  conversation keeping its own order, as a broker would deliver them;
- `trackers/<conversation_id>.json`: one conversation as the HTTP tracker
  endpoint returns it (flat events, with a few older CALM rows);
- `results/2026-12-01T09-00-00/<scenario>/run_<N>.json`: what
  `evaluate_agent` wrote after each run (no events; it links each
  conversation id to its scenario).

What the expansion adds around the described events, as the engine does:
a `memory_set` of `session_started_metadata` right after `session_started`;
the harness's `/session_start` user message before the greeting; an `action`
before every bot message; a `stack` update after every skill lifecycle event;
at the end of every bot turn a `listen` tool run (unless the turn hung up),
an `action_listen` and a `bot_turn_ended`. The scenario is named nowhere on
the events: only the results folder links a conversation to its scenario.

The verdicts written into the results are the hand-derived ones of
`expected.md` (repeated in VERDICTS below), except where Rasa 3.21's
evaluator diverges from mantle_stream (`docs/semantics.md`, "Divergences").

    python examples/eval/make_all.py           # write every data file
    python examples/eval/make_all.py --check   # exit 1 if a file on disk differs (or is stale)
    python examples/eval/make_all.py --list    # print each conversation with its sequence numbers
"""

# The conversations below are data: long lines of message texts, with the
# typographic dashes, quotes and bullets the agent really writes.
# ruff: noqa: E501, RUF001

from __future__ import annotations

import json
import random
import re
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EVENTS = HERE / "events"
TRACKERS = HERE / "trackers"
RESULTS_STAMP = "2026-12-01T09-00-00"
RESULTS = HERE / "results" / RESULTS_STAMP
SEED = "mantle_stream examples/eval"


@dataclass(frozen=True)
class Conversation:
    label: str  # a name for people (expected.md); never written on the events
    scenario: str  # scenario file stem
    start: str  # UTC time of session_started
    events: list[tuple[Any, ...]]
    tracker: bool = False  # written as a tracker document instead of ProtoJSON lines


def GAP(n: int) -> tuple[str, int]:
    """The next `n` sequence numbers are missing (the store skipped them)."""
    return ("gap", n)


# Compact description, one tuple per recorded event:
#   (t, 'start') / (t, 'end')                 session_started / session_ended
#   (t, 'mem', key, value) / (t, 'clear', key)
#   (t, 'user', text)
#   (t, 'bot', utter_action or None, text[, [(title, payload), ...]])
#   (t, 'skill', activated|completed|cancelled|interrupted|resumed, skill_id[, step_id])
#   (t, 'block', entered|completed|cancelled|interrupted|resumed, skill_id, block_id[, step_id])
#   (t, 'tool', skill_id or None, tool_name, arguments, result[, {'mcp': server, 'error': message}])
CONVERSATIONS: list[Conversation] = [
    # ---- card-replace-ok-1
    Conversation(
        "card-replace-ok-1",
        "card_replace_damaged",
        "2026-12-01T09:00:00",
        events=[
            (0.0, "start"),
            (0.245, "mem", "system.channel", "web"),
            (0.472, "mem", "project.customer_authenticated", True),
            (0.729, "mem", "project.customer_id", "cust-20931"),
            (
                1.779,
                "bot",
                "utter_greet",
                "Hi Dana, I'm Penny, Northbank's assistant. How can I help today?",
            ),
            (12.008, "user", "hi, my debit card is cracked and the chip doesn't work anymore"),
            (12.309, "skill", "activated", "card_replace"),
            (12.528, "block", "entered", "card_replace", "main"),
            (
                13.172,
                "tool",
                "card_replace",
                "get_cards",
                {"customer_id": "cust-20931", "status": "active"},
                {
                    "cards": [
                        {
                            "card_id": "card-4821",
                            "type": "debit",
                            "last4": "4821",
                            "status": "active",
                        },
                        {
                            "card_id": "card-9034",
                            "type": "credit",
                            "last4": "9034",
                            "status": "active",
                        },
                    ]
                },
            ),
            (
                14.797,
                "bot",
                "utter_ask_card_replace_selected_card_id",
                "I can see two active cards on your profile. Which one is damaged?",
                [
                    ("Debit •••• 4821", '/select_card{"card_id":"card-4821"}'),
                    ("Credit •••• 9034", '/select_card{"card_id":"card-9034"}'),
                ],
            ),
            (22.566, "user", "Debit •••• 4821"),
            (
                23.334,
                "tool",
                "card_replace",
                "set_fields",
                {"fields": {"selected_card_id": "card-4821", "replacement_reason": "damaged"}},
                {"ok": True},
            ),
            (23.584, "mem", "card_replace.selected_card_id", "card-4821"),
            (23.827, "mem", "card_replace.replacement_reason", "damaged"),
            (
                24.614,
                "tool",
                "card_replace",
                "create_replacement_draft",
                {"card_id": "card-4821", "reason": "damaged"},
                {"draft_order_id": "drf-5519"},
            ),
            (24.844, "mem", "card_replace.draft_order_id", "drf-5519"),
            (
                26.837,
                "bot",
                "utter_confirm_replacement_reason",
                "Sorry to hear that. Just to confirm: you'd like to replace your debit card ending in 4821 because it's damaged. The old card will be blocked once the new one is ordered. Is that right?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (36.231, "user", "yes that's right"),
            (
                37.749,
                "bot",
                "utter_ask_card_replace_shipping",
                "How should we ship it? Standard delivery is free and takes 5–7 business days; express costs €15 and takes 1–2 business days.",
                [
                    ("Standard (free, 5–7 days)", '/choose_shipping{"shipping":"standard"}'),
                    ("Express (€15, 1–2 days)", '/choose_shipping{"shipping":"express"}'),
                ],
            ),
            (45.749, "user", "standard is fine"),
            (
                46.352,
                "tool",
                "card_replace",
                "set_fields",
                {"fields": {"shipping": "standard"}},
                {"ok": True},
            ),
            (46.557, "mem", "card_replace.shipping", "standard"),
            (
                48.346,
                "bot",
                "utter_confirm_order",
                "Great. I'll send it to 14 Elm Row, Leith, Edinburgh EH6 5QT. Shall I place the order?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (54.739, "user", "yes please go ahead"),
            (
                55.492,
                "tool",
                "card_replace",
                "check_address",
                {"customer_id": "cust-20931", "address_id": "addr-1"},
                {"deliverable": True, "address_id": "addr-1"},
            ),
            (
                56.953,
                "tool",
                "card_replace",
                "order_replacement",
                {
                    "card_id": "card-4821",
                    "shipping": "standard",
                    "address_id": "addr-1",
                    "draft_order_id": "drf-5519",
                },
                {"order_id": "ord-77120", "eta": "2026-12-10"},
            ),
            (57.2, "mem", "card_replace.order_id", "ord-77120"),
            (57.401, "clear", "card_replace.draft_order_id"),
            (
                58.926,
                "bot",
                "utter_replacement_ordered",
                "Done! Your replacement debit card has been ordered (order ord-77120) and should arrive by 10 December. Your old card is now blocked.",
            ),
            (59.148, "block", "completed", "card_replace", "main", "confirm_order"),
            (59.782, "tool", "card_replace", "complete", {}, {"ok": True}),
            (60.125, "skill", "completed", "card_replace"),
            (60.644, "bot", "utter_anything_else", "Is there anything else I can help with?"),
            (67.576, "user", "no that's all, thanks!"),
            (69.289, "bot", "utter_goodbye", "You're welcome, Dana. Have a good day!"),
            (69.984, "tool", None, "hangup", {}, None),
            (72.653, "end"),
        ],
    ),
    # ---- card-replace-express-2
    Conversation(
        "card-replace-express-2",
        "card_replace_damaged",
        "2026-12-01T09:07:00",
        events=[
            (0.0, "start"),
            (0.211, "mem", "system.channel", "web"),
            (0.446, "mem", "project.customer_authenticated", True),
            (0.673, "mem", "project.customer_id", "cust-20931"),
            (
                1.75,
                "bot",
                "utter_greet",
                "Hi Dana, I'm Penny, Northbank's assistant. How can I help today?",
            ),
            (
                10.904,
                "user",
                "Hello. My card got bent in my wallet and now the chip won't read. I'm flying to Lisbon on Friday so I need a new one fast.",
            ),
            (11.273, "skill", "activated", "card_replace"),
            (11.482, "block", "entered", "card_replace", "main"),
            (
                12.276,
                "tool",
                "card_replace",
                "get_cards",
                {"customer_id": "cust-20931", "status": "active"},
                {
                    "cards": [
                        {
                            "card_id": "card-4821",
                            "type": "debit",
                            "last4": "4821",
                            "status": "active",
                        },
                        {
                            "card_id": "card-9034",
                            "type": "credit",
                            "last4": "9034",
                            "status": "active",
                        },
                    ]
                },
            ),
            (
                13.99,
                "bot",
                "utter_ask_card_replace_selected_card_id",
                "I can see two active cards on your profile. Which one is damaged?",
                [
                    ("Debit •••• 4821", '/select_card{"card_id":"card-4821"}'),
                    ("Credit •••• 9034", '/select_card{"card_id":"card-9034"}'),
                ],
            ),
            (21.821, "user", "Debit •••• 4821"),
            (
                22.429,
                "tool",
                "card_replace",
                "set_fields",
                {"fields": {"selected_card_id": "card-4821", "replacement_reason": "damaged"}},
                {"ok": True},
            ),
            (22.696, "mem", "card_replace.selected_card_id", "card-4821"),
            (22.953, "mem", "card_replace.replacement_reason", "damaged"),
            (
                23.674,
                "tool",
                "card_replace",
                "create_replacement_draft",
                {"card_id": "card-4821", "reason": "damaged"},
                {"draft_order_id": "drf-5519"},
            ),
            (23.887, "mem", "card_replace.draft_order_id", "drf-5519"),
            (
                25.748,
                "bot",
                "utter_confirm_replacement_reason",
                "Sorry to hear that. Just to confirm: you'd like to replace your debit card ending in 4821 because it's damaged. The old card will be blocked once the new one is ordered. Is that right?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (37.734, "user", "yes. also, does my account include travel insurance for the trip?"),
            (
                38.494,
                "tool",
                "card_replace",
                "cannot_help",
                {"topic": "travel_insurance"},
                {"ok": True},
            ),
            (
                40.398,
                "bot",
                "utter_cannot_help",
                "I'm sorry, I can't help with that here. For insurance questions please call 0131 496 0000.",
            ),
            (
                41.318,
                "bot",
                "utter_ask_card_replace_shipping",
                "How should we ship your new card? Standard delivery is free and takes 5–7 business days; express costs €15 and takes 1–2 business days.",
                [
                    ("Standard (free, 5–7 days)", '/choose_shipping{"shipping":"standard"}'),
                    ("Express (€15, 1–2 days)", '/choose_shipping{"shipping":"express"}'),
                ],
            ),
            (52.016, "user", "Express please, I need it before Friday"),
            (
                52.714,
                "tool",
                "card_replace",
                "set_fields",
                {"fields": {"shipping": "express"}},
                {"ok": True},
            ),
            (52.966, "mem", "card_replace.shipping", "express"),
            (
                54.867,
                "bot",
                "utter_confirm_order",
                "Express it is (€15). I'll send it to 14 Elm Row, Leith, Edinburgh EH6 5QT. Shall I place the order?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (60.056, "user", "yes"),
            (
                60.738,
                "tool",
                "card_replace",
                "check_address",
                {"customer_id": "cust-20931", "address_id": "addr-1"},
                {"deliverable": True, "address_id": "addr-1"},
            ),
            (
                61.948,
                "tool",
                "card_replace",
                "order_replacement",
                {
                    "card_id": "card-4821",
                    "shipping": "express",
                    "address_id": "addr-1",
                    "draft_order_id": "drf-5519",
                },
                {
                    "order_id": "ord-77161",
                    "eta": "2026-12-04",
                    "fee": {"amount": 15, "currency": "EUR"},
                },
            ),
            (62.155, "mem", "card_replace.order_id", "ord-77161"),
            (62.368, "clear", "card_replace.draft_order_id"),
            (
                63.969,
                "bot",
                "utter_replacement_ordered",
                "Done! Your replacement debit card has been ordered with express delivery and should arrive by 4 December, before your flight.",
            ),
            (64.21, "block", "completed", "card_replace", "main", "confirm_order"),
            (64.92, "tool", "card_replace", "complete", {}, {"ok": True}),
            (65.262, "skill", "completed", "card_replace"),
            (65.874, "bot", "utter_anything_else", "Is there anything else I can help with?"),
            (71.971, "user", "no thanks, bye"),
            (73.816, "bot", "utter_goodbye", "Safe travels, Dana!"),
            (74.452, "tool", None, "hangup", {}, None),
            (76.476, "end"),
        ],
    ),
    # ---- card-replace-split-3
    Conversation(
        "card-replace-split-3",
        "card_replace_damaged",
        "2026-12-01T09:15:00",
        events=[
            (0.0, "start"),
            (0.243, "mem", "system.channel", "web"),
            (0.45, "mem", "project.customer_authenticated", True),
            (0.674, "mem", "project.customer_id", "cust-20931"),
            (
                1.637,
                "bot",
                "utter_greet",
                "Hi Dana, I'm Penny, Northbank's assistant. How can I help today?",
            ),
            (
                13.603,
                "user",
                "my card came out of an ATM all scratched, the slot looked a bit weird, and now the chip doesn't work anywhere",
            ),
            (13.939, "skill", "activated", "card_replace"),
            (14.148, "block", "entered", "card_replace", "main"),
            (
                14.947,
                "tool",
                "card_replace",
                "get_cards",
                {"customer_id": "cust-20931", "status": "active"},
                {
                    "cards": [
                        {
                            "card_id": "card-4821",
                            "type": "debit",
                            "last4": "4821",
                            "status": "active",
                        },
                        {
                            "card_id": "card-9034",
                            "type": "credit",
                            "last4": "9034",
                            "status": "active",
                        },
                    ]
                },
            ),
            (
                16.871,
                "bot",
                "utter_ask_card_replace_selected_card_id",
                "I can see two active cards on your profile. Which one is damaged?",
                [
                    ("Debit •••• 4821", '/select_card{"card_id":"card-4821"}'),
                    ("Credit •••• 9034", '/select_card{"card_id":"card-9034"}'),
                ],
            ),
            (24.521, "user", "Debit •••• 4821"),
            (
                25.169,
                "tool",
                "card_replace",
                "set_fields",
                {
                    "fields": {
                        "selected_card_id": "card-4821",
                        "replacement_reason": "damaged",
                        "fraud_review": True,
                    }
                },
                {"ok": True},
            ),
            (25.436, "mem", "card_replace.selected_card_id", "card-4821"),
            (25.658, "mem", "card_replace.replacement_reason", "damaged"),
            (25.875, "mem", "card_replace.fraud_review", True),
            (
                26.591,
                "tool",
                "card_replace",
                "create_replacement_draft",
                {"card_id": "card-4821", "reason": "damaged"},
                {"draft_order_id": "drf-5588"},
            ),
            (26.85, "mem", "card_replace.draft_order_id", "drf-5588"),
            (
                28.588,
                "bot",
                "utter_confirm_replacement_reason",
                "Thanks. Because the ATM looked tampered with, I've flagged this for a quick fraud review as a precaution. To confirm: you'd like to replace your debit card ending in 4821 because it's damaged?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (34.423, "user", "yes"),
            (
                36.377,
                "bot",
                "utter_ask_card_replace_shipping",
                "How should we ship it? Standard delivery is free and takes 5–7 business days; express costs €15 and takes 1–2 business days.",
                [
                    ("Standard (free, 5–7 days)", '/choose_shipping{"shipping":"standard"}'),
                    ("Express (€15, 1–2 days)", '/choose_shipping{"shipping":"express"}'),
                ],
            ),
            (45.473, "user", "standard is fine"),
            (
                46.144,
                "tool",
                "card_replace",
                "set_fields",
                {"fields": {"shipping": "standard"}},
                {"ok": True},
            ),
            (46.37, "mem", "card_replace.shipping", "standard"),
            (
                47.073,
                "tool",
                "card_replace",
                "check_address",
                {"customer_id": "cust-20931", "address_id": "addr-1"},
                {"deliverable": True, "address_id": "addr-1"},
            ),
            (
                48.816,
                "bot",
                "utter_confirm_address",
                "I have 14 Elm Row, Leith, Edinburgh EH6 5QT on file. Is that still your address?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (55.538, "user", "yes, still there"),
            (
                56.997,
                "tool",
                "card_replace",
                "order_replacement",
                {
                    "card_id": "card-4821",
                    "shipping": "standard",
                    "address_id": "addr-1",
                    "draft_order_id": "drf-5588",
                },
                {"order_id": "ord-77204", "eta": "2026-12-10"},
            ),
            (57.216, "mem", "card_replace.order_id", "ord-77204"),
            (57.421, "clear", "card_replace.draft_order_id"),
            (
                59.377,
                "bot",
                "utter_replacement_ordered",
                "All set: your replacement debit card has been ordered and should arrive by 10 December.",
            ),
            (59.64, "block", "completed", "card_replace", "main", "confirm_order"),
            (60.25, "tool", "card_replace", "complete", {}, {"ok": True}),
            (60.622, "skill", "completed", "card_replace"),
            (61.272, "bot", "utter_anything_else", "Is there anything else I can help with?"),
            (67.447, "user", "nope, thanks"),
            (69.33, "bot", "utter_goodbye", "You're welcome, Dana. Have a good day!"),
            (70.067, "tool", None, "hangup", {}, None),
            (72.433, "end"),
        ],
    ),
    # ---- transfer-ok-1
    Conversation(
        "transfer-ok-1",
        "transfer_mcp",
        "2026-12-01T09:01:30",
        events=[
            (0.0, "start"),
            (0.213, "mem", "system.channel", "ios_app"),
            (0.466, "mem", "project.customer_authenticated", True),
            (0.705, "mem", "project.customer_id", "cust-31877"),
            (1.82, "bot", "utter_greet", "Hi Tomasz! What can I do for you?"),
            (15.032, "user", "Hi, I'd like to send 250 euros to my landlord"),
            (15.352, "skill", "activated", "transfer_money"),
            (
                16.07,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"amount": 250, "currency": "EUR"}},
                {"ok": True},
            ),
            (16.277, "mem", "transfer_money.amount", 250),
            (16.508, "mem", "transfer_money.currency", "EUR"),
            (
                18.241,
                "tool",
                "transfer_money",
                "list_payees",
                {"customer_id": "cust-31877", "query": "landlord"},
                {
                    "payees": [
                        {
                            "payee_id": "payee-0042",
                            "name": "Martin Keller",
                            "iban_last4": "4417",
                            "nickname": "landlord",
                        }
                    ]
                },
                {"mcp": "banking"},
            ),
            (18.464, "mem", "transfer_money.payee_id", "payee-0042"),
            (
                20.207,
                "bot",
                "utter_ask_transfer_money_reference",
                "I found Martin Keller (IBAN ending 4417), saved as “landlord”. What reference should the transfer carry?",
            ),
            (28.196, "user", "Rent December"),
            (
                28.893,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"reference": "Rent December"}},
                {"ok": True},
            ),
            (29.148, "mem", "transfer_money.reference", "Rent December"),
            (
                31.046,
                "bot",
                "utter_ask_transfer_confirmation",
                "Please confirm: send €250.00 from your current account to Martin Keller (IBAN ending 4417) with the reference “Rent December”.",
                [("Confirm", "/affirm"), ("Cancel", "/deny")],
            ),
            (42.957, "user", "not yet — does this cost anything?"),
            (
                43.568,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"confirmed": False}},
                {"ok": True},
            ),
            (43.828, "mem", "transfer_money.confirmed", False),
            (
                44.437,
                "tool",
                "transfer_money",
                "search_knowledge",
                {"query": "SEPA transfer fee current account"},
                {
                    "snippets": [
                        "SEPA transfers in euro within the EEA are free from current accounts."
                    ]
                },
            ),
            GAP(2),
            (
                46.449,
                "bot",
                None,
                "SEPA transfers in euros within the EU are free of charge from your current account. Shall I send it now?",
                [("Confirm", "/affirm"), ("Cancel", "/deny")],
            ),
            (55.032, "user", "ok then, go ahead"),
            (
                55.804,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"confirmed": True}},
                {"ok": True},
            ),
            (56.041, "mem", "transfer_money.confirmed", True),
            (
                56.67,
                "tool",
                "transfer_money",
                "check_transfer_limit",
                {"customer_id": "cust-31877", "amount": 250.0, "currency": "EUR"},
                {"within_limit": True, "remaining_daily": 4750},
                {"mcp": "banking"},
            ),
            (
                58.967,
                "tool",
                "transfer_money",
                "submit_transfer",
                {
                    "from_account": "acc-current-1",
                    "payee_id": "payee-0042",
                    "amount": 250.0,
                    "currency": "EUR",
                    "reference": "Rent December",
                },
                {
                    "transfer_id": "TX-2026-0093311",
                    "status": "accepted",
                    "execution_date": "2026-12-02",
                },
                {"mcp": "banking"},
            ),
            (59.2, "mem", "transfer_money.transfer_id", "TX-2026-0093311"),
            (
                60.854,
                "bot",
                "utter_transfer_submitted",
                "Done — €250.00 is on its way to Martin Keller. Your transfer reference is TX-2026-0093311.",
            ),
            (61.622, "tool", "transfer_money", "complete", {}, {"ok": True}),
            (62.017, "skill", "completed", "transfer_money"),
            (62.611, "bot", "utter_anything_else", "Anything else I can help with?"),
            (67.754, "user", "no, that's all"),
            (69.62, "bot", "utter_goodbye", "Have a great day, Tomasz!"),
            (72.224, "end"),
        ],
    ),
    # ---- transfer-string-amount-2
    Conversation(
        "transfer-string-amount-2",
        "transfer_mcp",
        "2026-12-01T09:10:00",
        events=[
            (0.0, "start"),
            (0.252, "mem", "system.channel", "ios_app"),
            (0.506, "mem", "project.customer_authenticated", True),
            (0.774, "mem", "project.customer_id", "cust-31877"),
            (1.694, "bot", "utter_greet", "Hi Tomasz! What can I do for you?"),
            (
                13.069,
                "user",
                "Send two hundred fifty euro to my landlord Martin Keller please, reference Rent December",
            ),
            (13.424, "skill", "activated", "transfer_money"),
            (
                14.06,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"amount": "250", "currency": "EUR"}},
                {"ok": True},
            ),
            (14.27, "mem", "transfer_money.amount", "250"),
            (14.54, "mem", "transfer_money.currency", "EUR"),
            (
                15.957,
                "tool",
                "transfer_money",
                "list_payees",
                {"customer_id": "cust-31877", "query": "landlord"},
                {
                    "payees": [
                        {
                            "payee_id": "payee-0042",
                            "name": "Martin Keller",
                            "iban_last4": "4417",
                            "nickname": "landlord",
                        }
                    ]
                },
                {"mcp": "banking"},
            ),
            (16.175, "mem", "transfer_money.payee_id", "payee-0042"),
            (
                16.862,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"reference": "Rent December"}},
                {"ok": True},
            ),
            (17.1, "mem", "transfer_money.reference", "Rent December"),
            (
                18.736,
                "bot",
                "utter_ask_transfer_confirmation",
                "Please confirm: send €250.00 from your current account to Martin Keller (IBAN ending 4417) with the reference “Rent December”.",
                [("Confirm", "/affirm"), ("Cancel", "/deny")],
            ),
            (27.386, "user", "Is it free? If so, go ahead."),
            (
                28.134,
                "tool",
                "transfer_money",
                "search_knowledge",
                {"query": "SEPA transfer fee current account"},
                {
                    "snippets": [
                        "SEPA transfers in euro within the EEA are free from current accounts."
                    ]
                },
            ),
            (
                28.755,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"confirmed": True}},
                {"ok": True},
            ),
            (29.016, "mem", "transfer_money.confirmed", True),
            (
                30.138,
                "bot",
                None,
                "Yes, SEPA transfers in euros are free from your current account.",
            ),
            (
                30.862,
                "tool",
                "transfer_money",
                "check_transfer_limit",
                {"customer_id": "cust-31877", "amount": "250", "currency": "EUR"},
                {"within_limit": True, "remaining_daily": 4750},
                {"mcp": "banking"},
            ),
            (
                32.835,
                "tool",
                "transfer_money",
                "submit_transfer",
                {
                    "from_account": "acc-current-1",
                    "payee_id": "payee-0042",
                    "amount": "250",
                    "currency": "EUR",
                    "reference": "Rent December",
                },
                {
                    "transfer_id": "TX-2026-0093540",
                    "status": "accepted",
                    "execution_date": "2026-12-02",
                },
                {"mcp": "banking"},
            ),
            (33.092, "mem", "transfer_money.transfer_id", "TX-2026-0093540"),
            (
                35.089,
                "bot",
                "utter_transfer_submitted",
                "Done — €250.00 is on its way to Martin Keller. Your transfer reference is TX-2026-0093540.",
            ),
            (35.879, "tool", "transfer_money", "complete", {}, {"ok": True}),
            (36.277, "skill", "completed", "transfer_money"),
            (36.802, "bot", "utter_anything_else", "Anything else I can help with?"),
            (42.124, "user", "no thanks"),
            (43.924, "bot", "utter_goodbye", "Have a great day, Tomasz!"),
            (46.206, "end"),
        ],
    ),
    # ---- transfer-declined-3
    Conversation(
        "transfer-declined-3",
        "transfer_mcp",
        "2026-12-01T09:16:00",
        events=[
            (0.0, "start"),
            (0.215, "mem", "system.channel", "ios_app"),
            (0.444, "mem", "project.customer_authenticated", True),
            (0.71, "mem", "project.customer_id", "cust-31877"),
            (1.748, "bot", "utter_greet", "Hi Tomasz! What can I do for you?"),
            (11.792, "user", "I need to pay my rent, 250 euros to my landlord"),
            (12.127, "skill", "activated", "transfer_money"),
            (
                12.831,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"amount": 250, "currency": "EUR"}},
                {"ok": True},
            ),
            (13.037, "mem", "transfer_money.amount", 250),
            (13.249, "mem", "transfer_money.currency", "EUR"),
            (
                14.97,
                "tool",
                "transfer_money",
                "list_payees",
                {"customer_id": "cust-31877", "query": "landlord"},
                {
                    "payees": [
                        {
                            "payee_id": "payee-0042",
                            "name": "Martin Keller",
                            "iban_last4": "4417",
                            "nickname": "landlord",
                        }
                    ]
                },
                {"mcp": "banking"},
            ),
            (15.209, "mem", "transfer_money.payee_id", "payee-0042"),
            (
                16.923,
                "bot",
                "utter_ask_transfer_money_reference",
                "I found Martin Keller (IBAN ending 4417), saved as “landlord”. What reference should the transfer carry?",
            ),
            (22.778, "user", "Rent December"),
            (
                23.437,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"reference": "Rent December"}},
                {"ok": True},
            ),
            (23.638, "mem", "transfer_money.reference", "Rent December"),
            (
                25.644,
                "bot",
                "utter_ask_transfer_confirmation",
                "Please confirm: send €250.00 from your current account to Martin Keller (IBAN ending 4417) with the reference “Rent December”.",
                [("Confirm", "/affirm"), ("Cancel", "/deny")],
            ),
            (37.389, "user", "hmm, not yet. is there a fee?"),
            (
                37.999,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"confirmed": False}},
                {"ok": True},
            ),
            (38.26, "mem", "transfer_money.confirmed", False),
            (
                38.906,
                "tool",
                "transfer_money",
                "search_knowledge",
                {"query": "SEPA transfer fee current account"},
                {
                    "snippets": [
                        "SEPA transfers in euro within the EEA are free from current accounts."
                    ]
                },
            ),
            (
                40.555,
                "bot",
                None,
                "SEPA transfers in euros within the EU are free of charge from your current account. Shall I send it now?",
                [("Confirm", "/affirm"), ("Cancel", "/deny")],
            ),
            (
                56.134,
                "user",
                "Actually I'll wait until my salary lands tomorrow. Cancel it for now.",
            ),
            (
                56.787,
                "tool",
                "transfer_money",
                "set_fields",
                {"fields": {"confirmed": False}},
                {"ok": True},
            ),
            (57.002, "mem", "transfer_money.confirmed", False),
            (57.367, "skill", "cancelled", "transfer_money", "autonomous"),
            (
                59.217,
                "bot",
                "utter_transfer_cancelled",
                "No problem, I haven't sent anything. You can ask me again any time.",
            ),
            (64.35, "user", "thanks"),
            (66.348, "bot", "utter_goodbye", "You're welcome, Tomasz!"),
            (68.935, "end"),
        ],
    ),
    # ---- identity-ok-1
    Conversation(
        "identity-ok-1",
        "identity_check",
        "2026-12-01T09:03:00",
        events=[
            (0.0, "start"),
            (0.214, "mem", "system.channel", "web"),
            (0.472, "mem", "project.customer_authenticated", False),
            (
                1.377,
                "bot",
                "utter_greet",
                "Hello! I'm Penny, Northbank's assistant. How can I help?",
            ),
            (16.067, "user", "Hi, I moved last month and need to change my address"),
            (16.402, "skill", "activated", "verify_identity"),
            (16.661, "block", "entered", "verify_identity", "main"),
            (
                18.426,
                "bot",
                "utter_ask_verify_identity_date_of_birth",
                "Happy to help. Before I can change your address I need to verify your identity. What's your date of birth?",
            ),
            (26.298, "user", "14 March 1989"),
            (
                27.055,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"date_of_birth": "1989-03-14"}},
                {"ok": True},
            ),
            (27.286, "mem", "verify_identity.date_of_birth", "1989-03-14"),
            (
                28.089,
                "tool",
                "verify_identity",
                "lookup_customer",
                {"date_of_birth": "1989-03-14", "web_session": "ws-88a1"},
                {
                    "match": True,
                    "customer_id": "cust-52310",
                    "phone_masked": "•••812",
                    "email_masked": "a•••@example.org",
                },
            ),
            (
                29.832,
                "bot",
                "utter_ask_verify_identity_otp_channel",
                "Thanks. Where should I send your one-time code?",
                [
                    ("SMS to •••812", '/choose_channel{"channel":"sms"}'),
                    ("Email to a•••@example.org", '/choose_channel{"channel":"email"}'),
                ],
            ),
            (35.563, "user", "SMS to •••812"),
            (
                36.237,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_channel": "sms"}},
                {"ok": True},
            ),
            (36.496, "mem", "verify_identity.otp_channel", "sms"),
            (
                41.575,
                "tool",
                "verify_identity",
                "send_otp",
                {"customer_id": "cust-52310", "channel": "sms"},
                None,
                {"error": "SMS gateway timeout (GATEWAY_TIMEOUT)"},
            ),
            (
                43.29,
                "bot",
                "utter_otp_send_failed",
                "Sorry, I couldn't send the SMS just now, our text message service isn't responding. I can email the code to a•••@example.org instead.",
                [
                    ("Send it by email", '/choose_channel{"channel":"email"}'),
                    ("Try SMS again", '/choose_channel{"channel":"sms"}'),
                ],
            ),
            (51.89, "user", "Send it by email"),
            (
                52.501,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_channel": "email"}},
                {"ok": True},
            ),
            (52.767, "mem", "verify_identity.otp_channel", "email"),
            (
                54.314,
                "tool",
                "verify_identity",
                "send_otp",
                {"customer_id": "cust-52310", "channel": "email"},
                {"sent": True, "expires_in_s": 300},
            ),
            (
                56.064,
                "bot",
                "utter_ask_verify_identity_otp_code",
                "I've emailed you a 6-digit code. Please type it here.",
            ),
            (86.303, "user", "481 920"),
            (
                87.021,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_code": "481920"}},
                {"ok": True},
            ),
            (87.27, "mem", "verify_identity.otp_code", "481920"),
            (
                88.015,
                "tool",
                "verify_identity",
                "verify_otp",
                {"customer_id": "cust-52310", "code": "481920"},
                {"valid": False, "attempts_left": 2},
            ),
            (88.236, "mem", "verify_identity.failed_attempts", 1),
            (
                90.073,
                "bot",
                "utter_otp_invalid",
                "That code doesn't match. Please check the email and try again.",
            ),
            (101.534, "user", "sorry, typo: 481 290"),
            (
                102.306,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_code": "481290"}},
                {"ok": True},
            ),
            (102.522, "mem", "verify_identity.otp_code", "481290"),
            (
                103.323,
                "tool",
                "verify_identity",
                "verify_otp",
                {"customer_id": "cust-52310", "code": "481290"},
                {"valid": True},
            ),
            (103.548, "mem", "project.customer_authenticated", True),
            (103.812, "mem", "project.customer_id", "cust-52310"),
            (104.027, "clear", "verify_identity.otp_code"),
            (104.289, "block", "completed", "verify_identity", "main", "check_code"),
            (105.03, "tool", "verify_identity", "complete", {}, {"ok": True}),
            (105.337, "skill", "completed", "verify_identity"),
            (107.019, "bot", "utter_identity_verified", "Thank you, Aisha, you're verified."),
            (107.366, "skill", "activated", "update_address"),
            (
                108.137,
                "bot",
                "utter_ask_update_address_new_address",
                "What's your new postal address?",
            ),
            (126.745, "user", "27 Canal Street, Manchester M1 3HE"),
            (
                127.475,
                "tool",
                "update_address",
                "set_fields",
                {"fields": {"new_address": "27 Canal Street, Manchester M1 3HE"}},
                {"ok": True},
            ),
            (127.695, "mem", "update_address.new_address", "27 Canal Street, Manchester M1 3HE"),
            (
                128.377,
                "tool",
                "update_address",
                "update_postal_address",
                {
                    "customer_id": "cust-52310",
                    "address": {
                        "line1": "27 Canal Street",
                        "city": "Manchester",
                        "postcode": "M1 3HE",
                        "country": "GB",
                    },
                },
                {"updated": True},
            ),
            (129.066, "tool", "update_address", "complete", {}, {"ok": True}),
            (129.397, "skill", "completed", "update_address"),
            (
                131.359,
                "bot",
                "utter_address_updated",
                "Done. Your address is now 27 Canal Street, Manchester M1 3HE. New cards and letters will go there.",
            ),
            (138.043, "user", "brilliant, thanks"),
            (140.042, "bot", "utter_goodbye", "You're welcome, Aisha!"),
            (142.593, "end"),
        ],
    ),
    # ---- identity-locked-2
    Conversation(
        "identity-locked-2",
        "identity_check",
        "2026-12-01T09:11:00",
        events=[
            (0.0, "start"),
            (0.261, "mem", "system.channel", "web"),
            (0.503, "mem", "project.customer_authenticated", False),
            (
                1.368,
                "bot",
                "utter_greet",
                "Hello! I'm Penny, Northbank's assistant. How can I help?",
            ),
            (15.912, "user", "Hi, I moved last month and need to change my address"),
            (16.315, "skill", "activated", "verify_identity"),
            (16.583, "block", "entered", "verify_identity", "main"),
            (
                18.154,
                "bot",
                "utter_ask_verify_identity_date_of_birth",
                "Happy to help. Before I can change your address I need to verify your identity. What's your date of birth?",
            ),
            (24.353, "user", "14 March 1989"),
            (
                25.076,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"date_of_birth": "1989-03-14"}},
                {"ok": True},
            ),
            (25.289, "mem", "verify_identity.date_of_birth", "1989-03-14"),
            (
                25.947,
                "tool",
                "verify_identity",
                "lookup_customer",
                {"date_of_birth": "1989-03-14", "web_session": "ws-88a1"},
                {
                    "match": True,
                    "customer_id": "cust-52310",
                    "phone_masked": "•••812",
                    "email_masked": "a•••@example.org",
                },
            ),
            (
                27.643,
                "bot",
                "utter_ask_verify_identity_otp_channel",
                "Thanks. Where should I send your one-time code?",
                [
                    ("SMS to •••812", '/choose_channel{"channel":"sms"}'),
                    ("Email to a•••@example.org", '/choose_channel{"channel":"email"}'),
                ],
            ),
            (33.56, "user", "SMS to •••812"),
            (
                34.341,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_channel": "sms"}},
                {"ok": True},
            ),
            (34.566, "mem", "verify_identity.otp_channel", "sms"),
            (
                41.148,
                "tool",
                "verify_identity",
                "send_otp",
                {"customer_id": "cust-52310", "channel": "sms"},
                None,
                {"error": "SMS gateway timeout (GATEWAY_TIMEOUT)"},
            ),
            (
                43.167,
                "bot",
                "utter_otp_send_failed",
                "Sorry, I couldn't send the SMS just now, our text message service isn't responding. I can email the code to a•••@example.org instead.",
                [
                    ("Send it by email", '/choose_channel{"channel":"email"}'),
                    ("Try SMS again", '/choose_channel{"channel":"sms"}'),
                ],
            ),
            (52.539, "user", "Send it by email"),
            (
                53.29,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_channel": "email"}},
                {"ok": True},
            ),
            (53.549, "mem", "verify_identity.otp_channel", "email"),
            (
                54.763,
                "tool",
                "verify_identity",
                "send_otp",
                {"customer_id": "cust-52310", "channel": "email"},
                {"sent": True, "expires_in_s": 300},
            ),
            (
                56.785,
                "bot",
                "utter_ask_verify_identity_otp_code",
                "I've emailed you a 6-digit code. Please type it here.",
            ),
            (90.866, "user", "118604"),
            (
                91.487,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_code": "118604"}},
                {"ok": True},
            ),
            (91.705, "mem", "verify_identity.otp_code", "118604"),
            (
                92.318,
                "tool",
                "verify_identity",
                "verify_otp",
                {"customer_id": "cust-52310", "code": "118604"},
                {"valid": False, "attempts_left": 2},
            ),
            (92.541, "mem", "verify_identity.failed_attempts", 1),
            (
                94.239,
                "bot",
                "utter_otp_invalid",
                "That code doesn't match. Please check the email and try again.",
            ),
            (105.882, "user", "118640"),
            (
                106.584,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_code": "118640"}},
                {"ok": True},
            ),
            (106.846, "mem", "verify_identity.otp_code", "118640"),
            (
                107.56,
                "tool",
                "verify_identity",
                "verify_otp",
                {"customer_id": "cust-52310", "code": "118640"},
                {"valid": False, "attempts_left": 1},
            ),
            (107.791, "mem", "verify_identity.failed_attempts", 2),
            (
                109.503,
                "bot",
                "utter_otp_invalid",
                "That code still doesn't match. You have one attempt left.",
            ),
            (129.055, "user", "hmm ok 116804"),
            (
                129.689,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_code": "116804"}},
                {"ok": True},
            ),
            (129.952, "mem", "verify_identity.otp_code", "116804"),
            (
                130.636,
                "tool",
                "verify_identity",
                "verify_otp",
                {"customer_id": "cust-52310", "code": "116804"},
                {"valid": False, "attempts_left": 0},
            ),
            (130.843, "mem", "verify_identity.failed_attempts", 3),
            (131.059, "mem", "project.customer_authenticated", False),
            (131.296, "clear", "verify_identity.otp_code"),
            (131.513, "block", "cancelled", "verify_identity", "main", "check_code"),
            (131.828, "skill", "cancelled", "verify_identity", "check_code"),
            (
                133.515,
                "bot",
                "utter_identity_locked",
                "For your security, identity verification is locked for 30 minutes after three incorrect codes. You can try again later or call us on 0161 496 0000.",
            ),
            (141.902, "user", "ugh. fine"),
            (143.705, "bot", "utter_goodbye", "Sorry for the hassle, Aisha."),
            (145.993, "end"),
        ],
    ),
    # ---- identity-legacy-3
    Conversation(
        "identity-legacy-3",
        "identity_check",
        "2026-12-01T09:18:00",
        tracker=True,
        events=[
            (0.0, "start"),
            (0.242, "mem", "project.customer_authenticated", False),
            (
                1.27,
                "bot",
                "utter_greet",
                "Hello! I'm Penny, Northbank's assistant. How can I help?",
            ),
            (11.613, "user", "I need to update my address please"),
            (12.016, "skill", "activated", "verify_identity"),
            (12.229, "block", "entered", "verify_identity", "main"),
            (
                13.957,
                "bot",
                "utter_ask_verify_identity_date_of_birth",
                "Happy to help. Before I can change your address I need to verify your identity. What's your date of birth?",
            ),
            (20.199, "user", "14/03/1989"),
            (
                20.98,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"date_of_birth": "1989-03-14"}},
                {"ok": True},
            ),
            (21.197, "mem", "verify_identity.date_of_birth", "1989-03-14"),
            (
                21.987,
                "tool",
                "verify_identity",
                "lookup_customer",
                {"date_of_birth": "1989-03-14", "web_session": "ws-91f0"},
                {
                    "match": True,
                    "customer_id": "cust-52310",
                    "phone_masked": "•••812",
                    "email_masked": "a•••@example.org",
                },
            ),
            (
                23.534,
                "bot",
                "utter_ask_verify_identity_otp_channel",
                "Thanks. Where should I send your one-time code?",
                [
                    ("SMS to •••812", '/choose_channel{"channel":"sms"}'),
                    ("Email to a•••@example.org", '/choose_channel{"channel":"email"}'),
                ],
            ),
            (28.796, "user", "SMS please"),
            (
                29.524,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_channel": "sms"}},
                {"ok": True},
            ),
            (29.753, "mem", "verify_identity.otp_channel", "sms"),
            (
                35.094,
                "tool",
                "verify_identity",
                "send_otp",
                {"customer_id": "cust-52310", "channel": "sms"},
                None,
                {"error": "SMS gateway timeout (GATEWAY_TIMEOUT)"},
            ),
            (
                36.603,
                "bot",
                "utter_otp_send_failed",
                "Sorry, I couldn't send the SMS just now, our text message service isn't responding. I can email the code to a•••@example.org instead.",
                [
                    ("Send it by email", '/choose_channel{"channel":"email"}'),
                    ("Try SMS again", '/choose_channel{"channel":"sms"}'),
                ],
            ),
            (43.463, "user", "Send it by email"),
            (
                44.183,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_channel": "email"}},
                {"ok": True},
            ),
            (44.411, "mem", "verify_identity.otp_channel", "email"),
            (
                45.979,
                "tool",
                "verify_identity",
                "send_otp",
                {"customer_id": "cust-52310", "channel": "email"},
                {"sent": True, "expires_in_s": 300},
            ),
            (
                47.897,
                "bot",
                "utter_ask_verify_identity_otp_code",
                "I've emailed you a 6-digit code. Please type it here.",
            ),
            (73.816, "user", "730115"),
            (
                74.615,
                "tool",
                "verify_identity",
                "set_fields",
                {"fields": {"otp_code": "730115"}},
                {"ok": True},
            ),
            (74.822, "mem", "verify_identity.otp_code", "730115"),
            (
                75.533,
                "tool",
                "verify_identity",
                "verify_otp",
                {"customer_id": "cust-52310", "code": "730115"},
                {"valid": True},
            ),
            (75.742, "mem", "project.customer_authenticated", True),
            (75.966, "clear", "verify_identity.otp_code"),
            (76.222, "block", "completed", "verify_identity", "main", "check_code"),
            (76.989, "tool", "verify_identity", "complete", {}, {"ok": True}),
            (77.349, "skill", "completed", "verify_identity"),
            (79.3, "bot", "utter_identity_verified", "Thank you, Aisha, you're verified."),
            (
                90.463,
                "user",
                "great, I'll do the address change in the app later actually. thanks!",
            ),
            (92.455, "bot", "utter_goodbye", "No problem. You're welcome, Aisha!"),
            (94.68, "end"),
        ],
    ),
    # ---- balance-ok-1
    Conversation(
        "balance-ok-1",
        "balance_and_limits",
        "2026-12-01T09:04:00",
        events=[
            (0.0, "start"),
            (0.238, "mem", "system.channel", "web"),
            (0.497, "mem", "project.customer_authenticated", True),
            (0.698, "mem", "project.customer_id", "cust-11402"),
            (1.582, "bot", "utter_greet", "Hi Lena! How can I help?"),
            (
                15.185,
                "user",
                "Hi! Going on holiday tomorrow. What's my current account balance and what are my daily card limits?",
            ),
            (15.584, "skill", "activated", "account_overview"),
            (
                16.244,
                "tool",
                "account_overview",
                "set_fields",
                {"fields": {"requested_items": ["balance", "card_limits"]}},
                {"ok": True},
            ),
            (16.482, "mem", "account_overview.requested_items", ["balance", "card_limits"]),
            (
                17.262,
                "tool",
                "account_overview",
                "get_balance",
                {"customer_id": "cust-11402", "account": "current"},
                {"available": 1843.27, "booked": 1901.77, "currency": "EUR"},
            ),
            (
                17.88,
                "tool",
                "account_overview",
                "get_card_limits",
                {"card_id": "card-6610"},
                {
                    "card_id": "card-6610",
                    "daily_card_payments": 2500,
                    "daily_atm_withdrawal": 500,
                    "currency": "EUR",
                },
            ),
            (
                18.096,
                "mem",
                "account_overview.card_limits",
                {"daily_card_payments": 2500, "daily_atm_withdrawal": 500},
            ),
            (19.987, "bot", None, "Your current account balance is €1,843.27 available."),
            (
                20.484,
                "bot",
                "utter_card_limits",
                "Your daily card limits: card payments up to €2,500 and ATM withdrawals up to €500.",
            ),
            (21.186, "tool", "account_overview", "complete", {}, {"ok": True}),
            (21.511, "skill", "completed", "account_overview"),
            (22.137, "bot", "utter_anything_else", "Anything else before your trip?"),
            (30.882, "user", "perfect, thanks!"),
            (32.551, "bot", "utter_goodbye", "Enjoy your holiday, Lena!"),
            (34.926, "end"),
        ],
    ),
    # ---- balance-wait-2
    Conversation(
        "balance-wait-2",
        "balance_and_limits",
        "2026-12-01T09:19:00",
        events=[
            (0.0, "start"),
            (0.248, "mem", "system.channel", "web"),
            (0.465, "mem", "project.customer_authenticated", True),
            (0.704, "mem", "project.customer_id", "cust-11402"),
            (1.568, "bot", "utter_greet", "Hi Lena! How can I help?"),
            (
                14.12,
                "user",
                "hey, can you tell me my balance and my daily card limits? travelling tomorrow",
            ),
            (14.52, "skill", "activated", "account_overview"),
            (
                15.179,
                "tool",
                "account_overview",
                "set_fields",
                {"fields": {"requested_items": ["balance", "card_limits"]}},
                {"ok": True},
            ),
            (15.423, "mem", "account_overview.requested_items", ["balance", "card_limits"]),
            (16.632, "bot", None, "One moment, let me look up your balance."),
            (
                17.248,
                "tool",
                "account_overview",
                "get_balance",
                {"customer_id": "cust-11402", "account": "current"},
                {"available": 312.4, "booked": 312.4, "currency": "EUR"},
            ),
            (18.9, "bot", None, "Your current account balance is €312.40 available."),
            (
                19.348,
                "bot",
                "utter_ask_more",
                "Would you like me to check your card limits as well?",
            ),
            (27.566, "user", "yes, I asked for both"),
            (
                28.167,
                "tool",
                "account_overview",
                "get_card_limits",
                {"card_id": "card-6610"},
                {
                    "card_id": "card-6610",
                    "daily_card_payments": 2500,
                    "daily_atm_withdrawal": 500,
                    "currency": "EUR",
                },
            ),
            (
                28.417,
                "mem",
                "account_overview.card_limits",
                {"daily_card_payments": 2500, "daily_atm_withdrawal": 500},
            ),
            (
                29.824,
                "bot",
                "utter_card_limits",
                "Your daily card limits: card payments up to €2,500 and ATM withdrawals up to €500.",
            ),
            (30.607, "tool", "account_overview", "complete", {}, {"ok": True}),
            (30.963, "skill", "completed", "account_overview"),
            (31.591, "bot", "utter_anything_else", "Anything else before your trip?"),
            (39.287, "user", "no"),
            (40.95, "bot", "utter_goodbye", "Enjoy your trip, Lena!"),
            (43.363, "end"),
        ],
    ),
    # ---- balance-chatty-3
    Conversation(
        "balance-chatty-3",
        "balance_and_limits",
        "2026-12-01T09:08:00",
        events=[
            (0.0, "start"),
            (0.251, "mem", "system.channel", "whatsapp"),
            (0.485, "mem", "project.customer_authenticated", True),
            (0.734, "mem", "project.customer_id", "cust-11402"),
            (1.643, "bot", "utter_greet", "Hi Lena! How can I help?"),
            (13.562, "user", "Hiya!! so I'm off to Crete tomorrow, super excited 😄"),
            (15.087, "bot", None, "That sounds lovely! How can I help you get ready for the trip?"),
            (30.673, "user", "do I need to tell you I'm travelling? like a travel notice?"),
            (
                31.844,
                "tool",
                None,
                "search_knowledge",
                {"query": "travel notice before going abroad"},
                {
                    "snippets": [
                        "Customers do not need to register travel. Cards work abroad automatically."
                    ]
                },
            ),
            (
                33.712,
                "bot",
                None,
                "You don't need to tell us you're travelling. Your Northbank cards work abroad automatically.",
            ),
            (47.752, "user", "oh nice. and does my card work in greece? it's a small island lol"),
            (
                48.899,
                "tool",
                None,
                "search_knowledge",
                {"query": "card acceptance Greece Visa"},
                {"snippets": ["Northbank debit cards are Visa cards accepted worldwide."]},
            ),
            (
                50.715,
                "bot",
                None,
                "Yes, your debit card is a Visa card, so it works anywhere in Greece that accepts Visa.",
            ),
            (62.056, "user", "what about ATM fees over there?"),
            (62.908, "bot", None, "Bear with me, I'm looking that up."),
            (
                64.145,
                "tool",
                None,
                "search_knowledge",
                {"query": "ATM withdrawal fee abroad EUR"},
                {
                    "snippets": [
                        "Cash withdrawals in euro within the EEA are free; the ATM operator may charge its own fee."
                    ]
                },
            ),
            (
                66.267,
                "bot",
                None,
                "Withdrawing euros in Greece is free from our side. Some ATM operators add their own fee, and the machine will show it before you confirm.",
            ),
            (
                82.343,
                "user",
                "ok so what are my limits and my balance? oh and is there a fee for paying in euros in shops?",
            ),
            (82.717, "skill", "activated", "account_overview"),
            (
                83.467,
                "tool",
                "account_overview",
                "set_fields",
                {"fields": {"requested_items": ["card_limits", "balance"]}},
                {"ok": True},
            ),
            (83.673, "mem", "account_overview.requested_items", ["card_limits", "balance"]),
            (
                84.298,
                "tool",
                "account_overview",
                "get_card_limits",
                {"card_id": "card-6610"},
                {
                    "card_id": "card-6610",
                    "daily_card_payments": 2500,
                    "daily_atm_withdrawal": 500,
                    "currency": "EUR",
                },
            ),
            (
                85.066,
                "tool",
                "account_overview",
                "get_balance",
                {"customer_id": "cust-11402", "account": "current"},
                {"available": 2210.05, "booked": 2264.55, "currency": "EUR"},
            ),
            (
                85.763,
                "tool",
                "account_overview",
                "search_knowledge",
                {"query": "card payment fee euro EEA"},
                {"snippets": ["Card payments in euro within the EEA carry no fee."]},
            ),
            (
                85.992,
                "mem",
                "account_overview.card_limits",
                {"daily_card_payments": 2500, "daily_atm_withdrawal": 500},
            ),
            (
                87.678,
                "bot",
                "utter_card_limits",
                "Your daily card limits: card payments up to €2,500 and ATM withdrawals up to €500.",
            ),
            (88.118, "bot", None, "Your current account balance is €2,210.05 available."),
            (
                88.678,
                "bot",
                None,
                "And paying by card in euros in shops is free, no foreign transaction fee in the EU.",
            ),
            (89.397, "tool", "account_overview", "complete", {}, {"ok": True}),
            (89.735, "skill", "completed", "account_overview"),
            (106.27, "user", "amazing. do you know any good beaches near Chania?"),
            (
                107.063,
                "tool",
                None,
                "cannot_help",
                {"topic": "travel_recommendations"},
                {"ok": True},
            ),
            (108.948, "bot", "utter_cannot_help", "I'm sorry, I can't help with that here."),
            (119.435, "user", "haha fair enough, you're a bank 🙈"),
            (121.189, "bot", None, "Guilty as charged! Anything banking-related I can do for you?"),
            (137.019, "user", "what's the contactless limit? can I tap for everything?"),
            (
                138.114,
                "tool",
                None,
                "search_knowledge",
                {"query": "contactless payment limit"},
                {
                    "snippets": [
                        "The contactless limit per payment is €50; above that a PIN is required."
                    ]
                },
            ),
            (
                139.883,
                "bot",
                None,
                "Contactless payments work up to €50 each; above that you'll be asked for your PIN.",
            ),
            (154.055, "user", "and if I lose my card over there what do I do??"),
            (
                155.266,
                "tool",
                None,
                "search_knowledge",
                {"query": "lost card abroad freeze"},
                {"snippets": ["Cards can be frozen instantly in the app under Cards > Freeze."]},
            ),
            (
                157.313,
                "bot",
                None,
                "If your card goes missing, freeze it instantly in the app under Cards → Freeze, then message me or call +44 131 496 0000, which works from abroad.",
            ),
            (175.436, "user", "does apple pay work abroad too"),
            (
                176.561,
                "tool",
                None,
                "search_knowledge",
                {"query": "Apple Pay abroad"},
                {
                    "snippets": [
                        "Apple Pay and Google Pay work abroad wherever contactless is accepted."
                    ]
                },
            ),
            (178.539, "bot", None, "Yes, Apple Pay works abroad anywhere contactless is accepted."),
            (
                195.607,
                "user",
                "what exchange rate do you use? not that I need it in greece I guess",
            ),
            (
                196.707,
                "tool",
                None,
                "search_knowledge",
                {"query": "exchange rate card payments non-euro"},
                {"snippets": ["Non-euro card payments use the Visa rate plus 1.5%."]},
            ),
            (
                198.659,
                "bot",
                None,
                "In Greece you pay in euros, so no conversion. For non-euro payments we use the Visa rate plus 1.5%.",
            ),
            (216.87, "user", "can I raise my ATM limit if I need more cash?"),
            (
                218.026,
                "tool",
                None,
                "search_knowledge",
                {"query": "raise ATM limit"},
                {
                    "snippets": [
                        "ATM limits can be raised temporarily in the app under Cards > Limits, up to €1,000."
                    ]
                },
            ),
            (
                219.665,
                "bot",
                None,
                "You can raise your ATM limit temporarily in the app under Cards → Limits, up to €1,000 a day.",
            ),
            (232.967, "user", "hmm maybe. my sister says cash is king on the islands"),
            (
                234.831,
                "bot",
                None,
                "Smaller tavernas and kiosks often prefer cash, so it's a good idea to carry a little.",
            ),
            (
                251.32,
                "user",
                "someone told me to always say no when the card machine asks about currency? is that right",
            ),
            (
                252.221,
                "tool",
                None,
                "search_knowledge",
                {"query": "dynamic currency conversion pay in local currency"},
                {
                    "snippets": [
                        "When a terminal offers to charge in your home currency, choose the local currency."
                    ]
                },
            ),
            (
                254.055,
                "bot",
                None,
                "If a card machine ever asks whether to pay in another currency, always choose euros. The machine's own conversion is usually more expensive.",
            ),
            (269.564, "user", "is there like emergency cash if everything goes wrong"),
            (
                270.66,
                "tool",
                None,
                "search_knowledge",
                {"query": "emergency cash abroad"},
                {"snippets": ["Emergency cash can be arranged via the 24/7 line."]},
            ),
            (
                272.384,
                "bot",
                None,
                "Yes, if you're stuck without a card we can arrange emergency cash through our 24/7 line.",
            ),
            (281.239, "user", "you're really helpful btw"),
            (283.031, "bot", None, "Thank you, that's kind! Anything else for your trip?"),
            (
                301.139,
                "user",
                "the hotel said they'll 'hold' 200 euros on my card?? is that a charge",
            ),
            (
                302.15,
                "tool",
                None,
                "search_knowledge",
                {"query": "hotel deposit pre-authorisation card"},
                {
                    "snippets": [
                        "Hotels and car rentals may place a pre-authorisation that is released within 7 days."
                    ]
                },
            ),
            (
                304.062,
                "bot",
                None,
                "Hotels and car rental desks often reserve a deposit on your card. It isn't charged and is usually released within 7 days of check-out.",
            ),
            (319.985, "user", "and if a shop refunds me how long does that take"),
            (
                321.113,
                "tool",
                None,
                "search_knowledge",
                {"query": "refund to card time"},
                {"snippets": ["Refunds to a card usually appear within 3 to 5 business days."]},
            ),
            (
                323.123,
                "bot",
                None,
                "Refunds to your card usually show up within 3–5 business days.",
            ),
            (335.091, "user", "what time is it in Greece btw, are they ahead of us?"),
            (
                336.672,
                "bot",
                None,
                "Greece is on Eastern European Time, two hours ahead of the UK in winter.",
            ),
            (350.75, "user", "should I change money at the airport before I go?"),
            (
                351.701,
                "tool",
                None,
                "search_knowledge",
                {"query": "airport ATM currency exchange desk"},
                {
                    "snippets": [
                        "Currency exchange desks charge a margin; ATMs in the destination are usually cheaper."
                    ]
                },
            ),
            (
                353.474,
                "bot",
                None,
                "It's usually cheaper to withdraw euros from a bank ATM in Greece than to use an airport exchange desk.",
            ),
            (
                369.506,
                "user",
                "last time I travelled my card got blocked on day 1, will that happen again?",
            ),
            (
                370.417,
                "tool",
                None,
                "search_knowledge",
                {"query": "card blocked abroad unusual activity"},
                {
                    "snippets": [
                        "Payments flagged as unusual trigger an in-app confirmation request."
                    ]
                },
            ),
            (
                372.521,
                "bot",
                None,
                "If a payment looks unusual we'll send a confirmation request in the app, so keep notifications on and the app updated.",
            ),
            (382.542, "user", "ok good. my phone is old though, the app is slow"),
            (
                384.168,
                "bot",
                None,
                "You can also confirm payments by replying to our SMS, no app needed.",
            ),
            (399.258, "user", "do you have a branch in greece in case I need one"),
            (
                400.444,
                "tool",
                None,
                "search_knowledge",
                {"query": "branch in Greece"},
                {"snippets": ["Northbank has no branches outside the UK."]},
            ),
            (
                402.504,
                "bot",
                None,
                "We don't have branches in Greece, but I'm here 24/7 and the phone line works from abroad too.",
            ),
            (417.979, "user", "does my account come with travel insurance?"),
            (
                418.918,
                "tool",
                None,
                "search_knowledge",
                {"query": "travel insurance included current account"},
                {
                    "snippets": [
                        "The Plus current account includes travel insurance; the Classic account does not."
                    ]
                },
            ),
            (
                420.816,
                "bot",
                None,
                "Your Classic current account doesn't include travel insurance; the Plus account does.",
            ),
            (428.23, "user", "ah ok, I have my own anyway"),
            (429.964, "bot", None, "Great, then you're covered."),
            (
                446.46,
                "user",
                "can I get a notification every time my card is used? paranoid about skimming",
            ),
            (
                447.408,
                "tool",
                None,
                "search_knowledge",
                {"query": "notifications card payments abroad"},
                {
                    "snippets": [
                        "Push notifications for every card payment can be enabled under Settings > Notifications."
                    ]
                },
            ),
            (
                449.266,
                "bot",
                None,
                "You can turn on a notification for every card payment under Settings → Notifications.",
            ),
            (
                467.84,
                "user",
                "ok last thing, can you give me my balance and limits again so I can screenshot it?",
            ),
            (468.244, "skill", "activated", "account_overview"),
            (
                468.911,
                "tool",
                "account_overview",
                "set_fields",
                {"fields": {"requested_items": ["balance", "card_limits"]}},
                {"ok": True},
            ),
            (469.149, "mem", "account_overview.requested_items", ["balance", "card_limits"]),
            (
                469.75,
                "tool",
                "account_overview",
                "get_balance",
                {"customer_id": "cust-11402", "account": "current"},
                {"available": 2210.05, "booked": 2264.55, "currency": "EUR"},
            ),
            (
                470.374,
                "tool",
                "account_overview",
                "get_card_limits",
                {"card_id": "card-6610"},
                {
                    "card_id": "card-6610",
                    "daily_card_payments": 2500,
                    "daily_atm_withdrawal": 500,
                    "currency": "EUR",
                },
            ),
            (
                470.623,
                "mem",
                "account_overview.card_limits",
                {"daily_card_payments": 2500, "daily_atm_withdrawal": 500},
            ),
            (472.247, "bot", None, "Your current account balance is €2,210.05 available."),
            (
                472.67,
                "bot",
                "utter_card_limits",
                "Your daily card limits: card payments up to €2,500 and ATM withdrawals up to €500.",
            ),
            (473.328, "tool", "account_overview", "complete", {}, {"ok": True}),
            (473.669, "skill", "completed", "account_overview"),
            (484.35, "user", "thank you sooo much!! 😊"),
            (485.855, "bot", "utter_goodbye", "You're welcome, Lena! Enjoy Crete!"),
            (491.568, "user", "bye!!"),
            (492.254, "bot", None, "Bye!"),
            (492.979, "tool", None, "hangup", {}, None),
            (495.611, "end"),
        ],
    ),
    # ---- fraud-cancel-ok-1
    Conversation(
        "fraud-cancel-ok-1",
        "fraud_report",
        "2026-12-01T09:05:00",
        events=[
            (0.0, "start"),
            (0.205, "mem", "system.channel", "web"),
            (0.464, "mem", "project.customer_authenticated", True),
            (0.679, "mem", "project.customer_id", "cust-47120"),
            (1.655, "bot", "utter_greet", "Hi Ravi, how can I help today?"),
            (10.935, "user", "There's a payment on my card I don't recognise"),
            (11.318, "skill", "activated", "report_fraud"),
            (11.523, "block", "entered", "report_fraud", "main"),
            (
                12.955,
                "tool",
                "report_fraud",
                "lookup_transactions",
                {"customer_id": "cust-47120", "days": 14, "type": "card_payment"},
                {
                    "transactions": [
                        {
                            "id": "txn-88213",
                            "amount": 89.99,
                            "currency": "EUR",
                            "merchant": "STREAMFLIX DIGITAL",
                            "date": "2026-11-28",
                        },
                        {
                            "id": "txn-88190",
                            "amount": 42.1,
                            "currency": "EUR",
                            "merchant": "LIDL 1187",
                            "date": "2026-11-27",
                        },
                        {
                            "id": "txn-88102",
                            "amount": 6.5,
                            "currency": "EUR",
                            "merchant": "COFFEE CORNER",
                            "date": "2026-11-26",
                        },
                    ]
                },
            ),
            (
                14.814,
                "bot",
                "utter_ask_report_fraud_transaction",
                "Here are your card payments from the last 14 days. Which one don't you recognise?",
                [
                    ("€89.99 STREAMFLIX DIGITAL, 28 Nov", '/select_transaction{"id":"txn-88213"}'),
                    ("€42.10 LIDL 1187, 27 Nov", '/select_transaction{"id":"txn-88190"}'),
                    ("€6.50 COFFEE CORNER, 26 Nov", '/select_transaction{"id":"txn-88102"}'),
                ],
            ),
            (25.171, "user", "the streamflix one, 89.99"),
            (
                25.969,
                "tool",
                "report_fraud",
                "set_fields",
                {"fields": {"disputed_transaction_id": "txn-88213"}},
                {"ok": True},
            ),
            (26.229, "mem", "report_fraud.disputed_transaction_id", "txn-88213"),
            (
                27.749,
                "bot",
                "utter_confirm_transaction",
                "Just to confirm: you did not make or authorise the €89.99 payment to STREAMFLIX DIGITAL on 28 November?",
                [("I didn't make it", "/affirm"), ("I made it", "/deny")],
            ),
            (
                41.535,
                "user",
                "hold on, before that, how much money do I have left in my current account?",
            ),
            (41.841, "skill", "interrupted", "report_fraud", "confirm_transaction"),
            (42.103, "block", "interrupted", "report_fraud", "main", "confirm_transaction"),
            (42.479, "skill", "activated", "account_overview"),
            (
                43.167,
                "tool",
                "account_overview",
                "get_balance",
                {"customer_id": "cust-47120", "account": "current"},
                {"available": 1204.55, "booked": 1294.54, "currency": "EUR"},
            ),
            (45.001, "bot", None, "Your current account balance is €1,204.55 available."),
            (45.778, "tool", "account_overview", "complete", {}, {"ok": True}),
            (46.14, "skill", "completed", "account_overview"),
            (46.535, "skill", "resumed", "report_fraud", "confirm_transaction"),
            (46.804, "block", "resumed", "report_fraud", "main", "confirm_transaction"),
            (
                47.463,
                "bot",
                "utter_confirm_transaction",
                "Back to the payment: did you make the €89.99 payment to STREAMFLIX DIGITAL on 28 November?",
                [("I didn't make it", "/affirm"), ("I made it", "/deny")],
            ),
            (
                63.494,
                "user",
                "oh wait… streamflix, that's my daughter's subscription. I do recognise it. please cancel the report",
            ),
            (63.724, "clear", "report_fraud.disputed_transaction_id"),
            (63.96, "block", "cancelled", "report_fraud", "main", "confirm_transaction"),
            (64.337, "skill", "cancelled", "report_fraud", "confirm_transaction"),
            (
                66.291,
                "bot",
                "utter_fraud_report_cancelled",
                "No problem, I've cancelled the fraud report. Your card stays active and nothing has been blocked.",
            ),
            (66.921, "bot", "utter_anything_else", "Anything else I can help with?"),
            (73.545, "user", "no, sorry for the trouble!"),
            (75.116, "bot", "utter_goodbye", "No trouble at all, Ravi. Have a good day!"),
            (77.661, "end"),
        ],
    ),
    # ---- fraud-restarted-2
    Conversation(
        "fraud-restarted-2",
        "fraud_report",
        "2026-12-01T09:13:00",
        events=[
            (0.0, "start"),
            (0.239, "mem", "system.channel", "web"),
            (0.479, "mem", "project.customer_authenticated", True),
            (0.732, "mem", "project.customer_id", "cust-47120"),
            (1.678, "bot", "utter_greet", "Hi Ravi, how can I help today?"),
            (10.953, "user", "I want to report a fraudulent card payment"),
            (11.32, "skill", "activated", "report_fraud"),
            (11.58, "block", "entered", "report_fraud", "main"),
            (
                12.838,
                "tool",
                "report_fraud",
                "lookup_transactions",
                {"customer_id": "cust-47120", "days": 14, "type": "card_payment"},
                {
                    "transactions": [
                        {
                            "id": "txn-88213",
                            "amount": 89.99,
                            "currency": "EUR",
                            "merchant": "STREAMFLIX DIGITAL",
                            "date": "2026-11-28",
                        },
                        {
                            "id": "txn-88190",
                            "amount": 42.1,
                            "currency": "EUR",
                            "merchant": "LIDL 1187",
                            "date": "2026-11-27",
                        },
                        {
                            "id": "txn-88102",
                            "amount": 6.5,
                            "currency": "EUR",
                            "merchant": "COFFEE CORNER",
                            "date": "2026-11-26",
                        },
                    ]
                },
            ),
            (
                14.72,
                "bot",
                "utter_ask_report_fraud_transaction",
                "Here are your card payments from the last 14 days. Which one don't you recognise?",
                [
                    ("€89.99 STREAMFLIX DIGITAL, 28 Nov", '/select_transaction{"id":"txn-88213"}'),
                    ("€42.10 LIDL 1187, 27 Nov", '/select_transaction{"id":"txn-88190"}'),
                    ("€6.50 COFFEE CORNER, 26 Nov", '/select_transaction{"id":"txn-88102"}'),
                ],
            ),
            (25.183, "user", "the streamflix one, 89.99"),
            (
                25.836,
                "tool",
                "report_fraud",
                "set_fields",
                {"fields": {"disputed_transaction_id": "txn-88213"}},
                {"ok": True},
            ),
            (26.07, "mem", "report_fraud.disputed_transaction_id", "txn-88213"),
            (
                27.957,
                "bot",
                "utter_confirm_transaction",
                "Just to confirm: you did not make or authorise the €89.99 payment to STREAMFLIX DIGITAL on 28 November?",
                [("I didn't make it", "/affirm"), ("I made it", "/deny")],
            ),
            (
                41.118,
                "user",
                "hold on, before that, how much money do I have left in my current account?",
            ),
            (41.42, "skill", "interrupted", "report_fraud", "confirm_transaction"),
            (41.668, "block", "interrupted", "report_fraud", "main", "confirm_transaction"),
            (42.048, "skill", "activated", "account_overview"),
            (
                42.694,
                "tool",
                "account_overview",
                "get_balance",
                {"customer_id": "cust-47120", "account": "current"},
                {"available": 1204.55, "booked": 1294.54, "currency": "EUR"},
            ),
            (44.382, "bot", None, "Your current account balance is €1,204.55 available."),
            (45.037, "tool", "account_overview", "complete", {}, {"ok": True}),
            (45.408, "skill", "completed", "account_overview"),
            (45.792, "skill", "resumed", "report_fraud", "identify_transaction"),
            (46.039, "block", "resumed", "report_fraud", "main", "identify_transaction"),
            (
                47.365,
                "tool",
                "report_fraud",
                "lookup_transactions",
                {"customer_id": "cust-47120", "days": 14, "type": "card_payment"},
                {
                    "transactions": [
                        {
                            "id": "txn-88213",
                            "amount": 89.99,
                            "currency": "EUR",
                            "merchant": "STREAMFLIX DIGITAL",
                            "date": "2026-11-28",
                        },
                        {
                            "id": "txn-88190",
                            "amount": 42.1,
                            "currency": "EUR",
                            "merchant": "LIDL 1187",
                            "date": "2026-11-27",
                        },
                        {
                            "id": "txn-88102",
                            "amount": 6.5,
                            "currency": "EUR",
                            "merchant": "COFFEE CORNER",
                            "date": "2026-11-26",
                        },
                    ]
                },
            ),
            (
                49.0,
                "bot",
                "utter_ask_report_fraud_transaction",
                "Let's continue with your report. Which payment don't you recognise?",
                [
                    ("€89.99 STREAMFLIX DIGITAL, 28 Nov", '/select_transaction{"id":"txn-88213"}'),
                    ("€42.10 LIDL 1187, 27 Nov", '/select_transaction{"id":"txn-88190"}'),
                    ("€6.50 COFFEE CORNER, 26 Nov", '/select_transaction{"id":"txn-88102"}'),
                ],
            ),
            (62.354, "user", "I already told you, the streamflix one. I really don't recognise it"),
            (
                63.052,
                "tool",
                "report_fraud",
                "set_fields",
                {"fields": {"disputed_transaction_id": "txn-88213"}},
                {"ok": True},
            ),
            (63.262, "mem", "report_fraud.disputed_transaction_id", "txn-88213"),
            (
                64.674,
                "tool",
                "report_fraud",
                "freeze_card",
                {"card_id": "card-3302", "reason": "suspected_fraud"},
                {"frozen": True},
            ),
            (64.908, "mem", "report_fraud.card_frozen", True),
            (
                66.871,
                "bot",
                "utter_card_frozen",
                "I've frozen your debit card ending in 3302 so no further payments can go through.",
            ),
            (
                67.548,
                "bot",
                "utter_ask_open_dispute",
                "Shall I open a dispute for the €89.99 STREAMFLIX DIGITAL payment now?",
                [("Yes", "/affirm"), ("No", "/deny")],
            ),
            (
                86.083,
                "user",
                "wait, STREAMFLIX... that's my daughter's subscription! Cancel the report and please unfreeze my card",
            ),
            (
                86.801,
                "tool",
                "report_fraud",
                "unfreeze_card",
                {"card_id": "card-3302"},
                {"frozen": False},
            ),
            (87.023, "mem", "report_fraud.card_frozen", False),
            (87.227, "clear", "report_fraud.disputed_transaction_id"),
            (87.467, "block", "cancelled", "report_fraud", "main", "open_dispute"),
            (87.831, "skill", "cancelled", "report_fraud", "open_dispute"),
            (
                89.376,
                "bot",
                "utter_fraud_report_cancelled",
                "Done: I've cancelled the fraud report and unfrozen your card. It works again right away.",
            ),
            (97.213, "user", "ok. thanks I guess"),
            (98.876, "bot", "utter_goodbye", "Sorry for the confusion, Ravi. Have a good day!"),
            (101.249, "end"),
        ],
    ),
]


@dataclass(frozen=True)
class Scenario:
    name: str
    assertions: tuple[str, ...]  # kinds, in goals.assertions order
    criteria: tuple[str, ...]


SCENARIOS = {
    "card_replace_damaged": Scenario(
        "Customer replaces a damaged card",
        (
            "skill_activated",
            "ordered_block_entered",
            "memory_was_set",
            "memory_was_not_set",
            "memory_was_cleared",
            "tool_executed",
            "tools_within_one_turn",
            "bot_uttered",
            "bot_did_not_utter",
            "ordered_block_completed",
            "skill_completed",
            "sequencing",
        ),
        (
            "Agent identifies which card is damaged before ordering anything",
            "Agent confirms shipping speed and address with the customer",
            "Agent confirms the replacement order and tells the customer when it arrives",
        ),
    ),
    "transfer_mcp": Scenario(
        "Customer transfers money to a saved payee",
        (
            "skill_activated",
            "memory_was_set",
            "memory_was_not_set",
            "tool_executed",
            "tool_executed",
            "tools_within_one_turn",
            "bot_uttered",
            "bot_did_not_utter",
            "skill_completed",
            "sequencing",
        ),
        (
            "Agent finds the right payee without asking for an IBAN",
            "Agent reads back amount, payee and reference before submitting",
            "Agent gives the customer a transfer reference after submitting",
        ),
    ),
    "identity_check": Scenario(
        "Customer verifies identity when the SMS code cannot be sent",
        (
            "ordered_block_entered",
            "tool_executed",
            "tool_executed",
            "bot_uttered",
            "memory_was_set",
            "memory_was_not_set",
            "memory_was_cleared",
            "ordered_block_completed",
            "bot_did_not_utter",
            "sequencing",
        ),
        (
            "Agent explains that the SMS could not be sent and offers an alternative",
            "Agent never reveals the one-time code in its own messages",
        ),
    ),
    "balance_and_limits": Scenario(
        "Customer checks balance and card limits in one go",
        (
            "skill_activated",
            "tools_within_one_turn",
            "tool_executed",
            "memory_was_set",
            "bot_uttered",
            "bot_uttered",
            "bot_did_not_utter",
            "skill_completed",
            "tools_within_one_turn",
        ),
        ("Agent answers both questions in one reply", "Agent does not ask the customer to wait"),
    ),
    "fraud_report": Scenario(
        "Customer disputes a card payment, checks balance midway, then cancels",
        (
            "skill_activated",
            "ordered_block_entered",
            "tool_executed",
            "skill_interrupted",
            "ordered_block_interrupted",
            "skill_resumed",
            "ordered_block_resumed",
            "skill_cancelled",
            "ordered_block_cancelled",
            "memory_was_set",
            "memory_was_cleared",
            "memory_was_not_set",
            "bot_did_not_utter",
            "bot_uttered",
            "sequencing",
        ),
        (
            "Agent answers the balance question and returns to the report where it left off",
            "Agent cancels cleanly and confirms that the card stays active",
        ),
    ),
}

# Rasa 3.21 reads an omitted button payload as "must be empty": the second
# button of identity_check's assertion 3 ("Try SMS again", no payload given)
# carries /choose_channel{"channel":"sms"}, so Rasa records that check failed.
RASA_BUTTON_PAYLOAD = {3: False}

# Per conversation: mantle_stream's verdict of each assertion (P passed, F failed),
# hand-derived in expected.md (--check compares the two); the assertions where
# Rasa 3.21's evaluator records another `passed` (docs/semantics.md, "Divergences");
# the LLM judge's verdict on each criterion.
VERDICTS: dict[str, tuple[str, dict[int, bool], str]] = {
    "card-replace-ok-1": ("PPPPPPPPPPPP", {}, "PPP"),
    "card-replace-express-2": ("PPPPPFPPFPPP", {}, "PPP"),
    "card-replace-split-3": ("PPPFPPFPPPPP", {}, "PPP"),
    "transfer-ok-1": ("PPPPPPPPPP", {}, "PPP"),
    "transfer-string-amount-2": ("PFPPFPPPPP", {}, "PPP"),
    "transfer-declined-3": ("PPFPFFFPFF", {}, "PPF"),
    "identity-ok-1": ("PPPPPPPPPP", RASA_BUTTON_PAYLOAD, "PP"),
    "identity-locked-2": ("PPPPFFPFFF", RASA_BUTTON_PAYLOAD, "PP"),
    "identity-legacy-3": ("PPPPPPPPPP", RASA_BUTTON_PAYLOAD, "PP"),
    "balance-ok-1": ("PPPPPPPPP", {}, "PP"),
    "balance-wait-2": ("PFPPPPFPF", {}, "FF"),
    "balance-chatty-3": ("PPPPPPFPP", {}, "PF"),
    "fraud-cancel-ok-1": ("PPPPPPPPPPPPPPP", {}, "PP"),
    "fraud-restarted-2": ("PPPPPFFFPPPFFPP", {}, "FF"),
}


# ---------------------------------------------------------------------------
# Expansion: the compact description -> the events the engine records.


def _epoch(when: str) -> float:
    return datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _dumps(value: Any) -> str:
    """A JSON text as Mantle embeds one (value_json, arguments_json, metadata): Python's defaults."""
    return json.dumps(value)


@dataclass
class Event:
    kind: str
    ts: float
    fields: dict[str, Any]
    gap: int = 0  # sequence numbers skipped before this event


STEPPED = {"cancelled", "interrupted", "resumed"}


def expand(conv: Conversation, rng: random.Random) -> list[Event]:
    """The described events plus what the engine records around them."""
    t0 = _epoch(conv.start)
    out: list[Event] = []
    stack: list[dict[str, str]] = []
    pending_gap = 0
    bot_spoke = False  # a bot message since the last user message
    hung_up = False  # this bot turn ended with a hangup run
    greeted = False

    def emit(kind: str, ts: float, **fields: Any) -> None:
        nonlocal pending_gap
        out.append(Event(kind, round(ts, 6), fields, pending_gap))
        pending_gap = 0

    def active_skill() -> str | None:
        return stack[-1]["skill_id"] if stack else None

    def end_bot_turn(before: float) -> None:
        nonlocal bot_spoke, hung_up
        if not bot_spoke:
            return
        t = out[-1].ts
        if not hung_up:
            emit(
                "tool_executed",
                t + 0.180,
                tool_name="listen",
                arguments={},
                source="local",
                mcp_server=None,
                result={"ok": True},
                error_message=None,
                skill=active_skill(),
            )
            emit("action", t + 0.184, name="action_listen")
        emit("bot_turn_ended", t + 0.188)
        assert out[-1].ts < before, (conv.label, "no room to end the bot turn", t, before)
        bot_spoke = hung_up = False

    def stack_update(op: dict[str, Any], t: float) -> None:
        emit("stack", t + 0.004, update=_dumps([op]))

    for item in conv.events:
        if item[0] == "gap":
            pending_gap += item[1]
            continue
        offset, kind, *rest = item
        t = t0 + offset
        if kind == "start":
            if conv.tracker:
                emit("action", t - 0.012, name="action_session_start")
            emit("session_started", t)
            emit(
                "memory_set",
                t + 0.011,
                key="session_started_metadata",
                value={"is_simulation": True},
            )
            if conv.tracker:
                emit(
                    "slot",
                    t + 0.013,
                    name="session_started_metadata",
                    value={"is_simulation": True},
                )
        elif kind == "end":
            end_bot_turn(t)
            emit("session_ended", t)
        elif kind == "mem":
            emit("memory_set", t, key=rest[0], value=rest[1])
        elif kind == "clear":
            emit("memory_cleared", t, key=rest[0])
        elif kind == "user":
            end_bot_turn(t)
            emit("user", t, text=rest[0], parse_data={})
        elif kind == "bot":
            utter, text = rest[0], rest[1]
            buttons = rest[2] if len(rest) > 2 else None
            if not greeted:
                # evaluate_agent opens the session with a /session_start message
                # (carrying the simulation metadata); the greeting answers it.
                greeted = True
                emit(
                    "user",
                    t - 0.640,
                    text="/session_start",
                    parse_data={
                        "intent": {"name": "session_start", "confidence": 1.0},
                        "entities": [],
                        "text": "/session_start",
                    },
                )
                if conv.tracker:
                    emit("flow_started", t - 0.520, flow_id="pattern_session_start")
            emit("action", t - 0.004, name=utter or "action_send_text")
            emit(
                "bot",
                t,
                text=text,
                utter=utter,
                buttons=[{"title": b, "payload": p} for b, p in buttons] if buttons else None,
            )
            bot_spoke = True
        elif kind == "skill":
            what, skill = rest[0], rest[1]
            step = rest[2] if len(rest) > 2 else ""
            fields: dict[str, Any] = {"skill_id": skill}
            if what in STEPPED:
                fields["step_id"] = step
            emit("skill_" + what, t, **fields)
            if what == "activated":
                frame = {
                    "frame_id": "".join(
                        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8)
                    ),
                    "skill_id": skill,
                    "state": "active",
                    "step_id": "START",
                    "type": "skill",
                }
                stack_update({"op": "add", "path": f"/{len(stack)}", "value": frame}, t)
                stack.append(frame)
            else:
                i = max(i for i, f in enumerate(stack) if f["skill_id"] == skill)
                if what in ("completed", "cancelled"):
                    stack_update({"op": "remove", "path": f"/{i}"}, t)
                    del stack[i]
                else:
                    state = "interrupted" if what == "interrupted" else "active"
                    stack_update({"op": "replace", "path": f"/{i}/state", "value": state}, t)
        elif kind == "block":
            what, skill, block = rest[0], rest[1], rest[2]
            fields = {"skill_id": skill, "block_id": block}
            if what != "entered":
                fields["step_id"] = rest[3] if len(rest) > 3 else ""
            emit("ordered_block_" + what, t, **fields)
        elif kind == "tool":
            skill, name, arguments, result = rest[:4]
            opts = rest[4] if len(rest) > 4 else {}
            emit(
                "tool_executed",
                t,
                tool_name=name,
                arguments=arguments,
                source="mcp" if "mcp" in opts else "local",
                mcp_server=opts.get("mcp"),
                result=result,
                error_message=opts.get("error"),
                skill=skill,
            )
            hung_up = name == "hangup"
        else:
            raise ValueError(f"{conv.label}: unknown item {item!r}")

    for a, b in pairwise(out):
        assert a.ts < b.ts, (conv.label, "timestamps must increase", a, b)
    return out


SKIPPED = {"stack", "action", "bot_turn_ended", "slot", "flow_started"}


# ---------------------------------------------------------------------------
# Rendering.


def conversation_id(conv: Conversation) -> str:
    rng = random.Random(f"{SEED}/{conv.label}/id")
    return f"sim-{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def uuid7(ts: float, counter: int, rng: random.Random) -> str:
    """A UUIDv7: 48-bit Unix milliseconds, then a 12-bit counter, then random bits."""
    ms = int(ts * 1000)
    value = (
        (ms << 80) | (0x7 << 76) | ((counter & 0xFFF) << 64) | (0b10 << 62) | rng.getrandbits(62)
    )
    return str(uuid.UUID(int=value))


def proto_payload(ev: Event) -> tuple[str | None, dict[str, Any]]:
    """(envelope metadata, payload) of one event in ProtoJSON."""
    f = ev.fields
    if ev.kind == "user":
        return None, {
            "text": f["text"],
            "parse_data": f["parse_data"],
            "input_channel": "rest",
            "message_id": None,
            "anonymized_at": None,
        }
    if ev.kind == "bot":
        meta = _dumps({"utter_action": f["utter"]}) if f["utter"] else None
        data = {"buttons": f["buttons"]} if f["buttons"] else {}
        return meta, {"text": f["text"], "data": data, "anonymized_at": None}
    if ev.kind == "memory_set":
        return None, {"key": f["key"], "value_json": _dumps(f["value"]), "anonymized_at": None}
    if ev.kind == "tool_executed":
        meta = _dumps({"skill_id": f["skill"]}) if f["skill"] else None
        return meta, {
            "tool_name": f["tool_name"],
            "arguments_json": _dumps(f["arguments"]),
            "source": f["source"],
            "result_json": None if f["result"] is None else _dumps(f["result"]),
            "is_error": f["error_message"] is not None,
            "error_message": f["error_message"],
            "mcp_server": f["mcp_server"],
        }
    if ev.kind == "action":
        return None, {"action_name": f["name"], "policy": None, "confidence": None}
    return None, dict(f)


def proto_lines(
    conv: Conversation, events: list[Event], rng: random.Random
) -> list[tuple[float, int, str]]:
    cid = conversation_id(conv)
    lines = []
    seq = -1
    for ev in events:
        seq += 1 + ev.gap
        meta, payload = proto_payload(ev)
        # Key order as the serializer writes it: not the schema's.
        row = {
            "conversation_id": cid,
            "timestamp": ev.ts,
            "metadata": meta,
            "event_id": uuid7(ev.ts, seq, rng),
            "sequence": seq,
            ev.kind: payload,
            "user_id": None,
            "deployment_environment": None,
            "session_id": None,
        }
        lines.append((ev.ts, seq, json.dumps(row, ensure_ascii=False, separators=(",", ":"))))
    return lines


def flat_event(ev: Event, rng: random.Random) -> dict[str, Any]:
    f = ev.fields
    row: dict[str, Any] = {"event": ev.kind, "timestamp": ev.ts}
    if ev.kind == "user":
        parse_data = f["parse_data"] or {
            "intent": {"name": None, "confidence": 0.0},
            "entities": [],
            "text": f["text"],
        }
        row |= {
            "text": f["text"],
            "parse_data": parse_data,
            "input_channel": "rest",
            "message_id": uuid.UUID(int=rng.getrandbits(128), version=4).hex,
        }
    elif ev.kind == "bot":
        if f["utter"]:
            row["metadata"] = {"utter_action": f["utter"]}
        row |= {"text": f["text"], "data": {"buttons": f["buttons"]} if f["buttons"] else {}}
    elif ev.kind == "tool_executed":
        if f["skill"]:
            row["metadata"] = {"skill_id": f["skill"]}
        row |= {
            "tool_name": f["tool_name"],
            "arguments": f["arguments"],
            "source": f["source"],
            "result": f["result"],
            "is_error": f["error_message"] is not None,
            "error_message": f["error_message"],
        }
        if f["mcp_server"]:
            row["mcp_server"] = f["mcp_server"]
    elif ev.kind == "action":
        row |= {"name": f["name"], "policy": None, "confidence": None}
    else:
        row |= f
    return row


def tracker_document(conv: Conversation, events: list[Event], rng: random.Random) -> dict[str, Any]:
    rows = [flat_event(ev, rng) for ev in events]
    slots: dict[str, Any] = {}
    for ev in events:
        if ev.kind == "memory_set":
            slots[ev.fields["key"]] = ev.fields["value"]
        elif ev.kind == "memory_cleared":
            slots[ev.fields["key"]] = None
    last_user = next(r for r in reversed(rows) if r["event"] == "user")
    return {
        "sender_id": conversation_id(conv),
        "slots": slots,
        "latest_message": {
            **last_user["parse_data"],
            "message_id": last_user["message_id"],
            "metadata": {},
        },
        "latest_event_time": rows[-1]["timestamp"],
        "followup_action": None,
        "paused": False,
        "stack": [],
        "events": rows,
        "latest_input_channel": "rest",
        "active_loop": {},
        "latest_action": {"action_name": "action_listen"},
        "latest_action_name": "action_listen",
    }


def run_result(conv: Conversation, run_index: int, events: list[Event]) -> dict[str, Any]:
    scenario = SCENARIOS[conv.scenario]
    ours, rasa_differs, criteria = VERDICTS[conv.label]
    assert len(ours) == len(scenario.assertions) and len(criteria) == len(scenario.criteria), (
        conv.label
    )
    passed = [v == "P" for v in ours]
    for index, value in rasa_differs.items():
        passed[index] = value
    judged = [v == "P" for v in criteria]
    # Agent response latency: from each real user message to the agent's first message after it.
    latencies = []
    for i, ev in enumerate(events):
        if ev.kind == "user" and not ev.fields["text"].startswith("/"):
            reply = next(e for e in events[i + 1 :] if e.kind == "bot")
            latencies.append(round((reply.ts - ev.ts) * 1000))
    ordered = sorted(latencies)
    return {
        "scenario_slug": conv.scenario,
        "scenario_name": scenario.name,
        "run_index": run_index,
        "conversation_id": conversation_id(conv),
        "passed": all(passed) and all(judged),
        "started_at": _iso(events[0].ts),
        "ended_at": _iso(events[-1].ts),
        "duration_s": round(events[-1].ts - events[0].ts, 3),
        "turns": len(latencies),
        "latency_ms": {
            "agent_response_mean": round(sum(ordered) / len(ordered)),
            "agent_response_p50": ordered[(len(ordered) - 1) // 2],
            "agent_response_max": ordered[-1],
        },
        "assertions": [
            {"index": i, "assertion": kind, "passed": p}
            for i, (kind, p) in enumerate(zip(scenario.assertions, passed, strict=True))
        ],
        "criteria": [
            {"index": i, "criterion": text, "passed": p}
            for i, (text, p) in enumerate(zip(scenario.criteria, judged, strict=True))
        ],
    }


# ---------------------------------------------------------------------------
# Files.


def build() -> tuple[dict[Path, str], dict[str, list[Event]]]:
    files: dict[Path, str] = {}
    expanded: dict[str, list[Event]] = {}
    per_scenario: dict[str, list[str]] = {}
    merged: list[tuple[float, int, int, str]] = []
    run_index: dict[str, int] = {}
    for rank, conv in enumerate(CONVERSATIONS):
        rng = random.Random(f"{SEED}/{conv.label}")
        events = expand(conv, rng)
        expanded[conv.label] = events
        cid = conversation_id(conv)
        if conv.tracker:
            doc = tracker_document(conv, events, rng)
            files[TRACKERS / f"{cid}.json"] = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        else:
            for ts, seq, line in proto_lines(conv, events, rng):
                per_scenario.setdefault(conv.scenario, []).append(line)
                merged.append((ts, rank, seq, line))
        run_index[conv.scenario] = n = run_index.get(conv.scenario, 0) + 1
        files[RESULTS / conv.scenario / f"run_{n}.json"] = (
            json.dumps(run_result(conv, n, events), ensure_ascii=False, indent=2) + "\n"
        )
    for scenario, lines in per_scenario.items():
        files[EVENTS / f"{scenario}.jsonl"] = "".join(line + "\n" for line in lines)
    merged.sort()
    files[EVENTS / "all.jsonl"] = "".join(line + "\n" for *_, line in merged)
    return files, expanded


def owned_files() -> set[Path]:
    """Files on disk in the folders this script writes."""
    found = set(EVENTS.glob("*.jsonl")) | set(TRACKERS.glob("*.json"))
    found |= set((HERE / "results").glob("**/*.json"))
    return found


def expected_md_verdicts() -> dict[str, str]:
    """The P/F string of each conversation's table in expected.md, keyed by label."""
    labels = {conversation_id(c): c.label for c in CONVERSATIONS}
    out: dict[str, str] = {}
    label = None
    for line in (HERE / "expected.md").read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^### `(sim-[0-9a-f-]+)`", line):
            label = labels.get(m.group(1), m.group(1))
            out[label] = ""
        elif label and (m := re.match(r"^\| (\d+) \| \w+ \| (passed|failed) \|", line)):
            out[label] += "P" if m.group(2) == "passed" else "F"
    return out


def listing(expanded: dict[str, list[Event]]) -> str:
    """Each conversation's events with the position a verdict's decided_at names."""
    out = []
    for conv in CONVERSATIONS:
        out.append(
            f"== {conv.label}  {conversation_id(conv)}  ({conv.scenario}"
            + (", tracker document: positions" if conv.tracker else ": sequences")
            + ")"
        )
        seq = -1
        turn = 0
        for pos, ev in enumerate(expanded[conv.label]):
            seq += 1 + ev.gap
            at = pos if conv.tracker else seq
            f = ev.fields
            if ev.kind == "user" and f["text"].strip() and not f["text"].strip().startswith("/"):
                turn += 1
            detail = {k: v for k, v in f.items() if v is not None and k != "parse_data"}
            if ev.kind == "tool_executed":
                detail = {
                    "tool": f["tool_name"],
                    "args": f["arguments"],
                    "skill": f["skill"],
                    "source": f["source"],
                    "mcp": f["mcp_server"],
                    "error": f["error_message"],
                }
            elif ev.kind == "stack":
                detail = {}
            out.append(
                f"{at:4d} t{turn:<2d} {ev.kind:26s} {json.dumps(detail, ensure_ascii=False)}"
            )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    files, expanded = build()
    if "--list" in argv:
        print(listing(expanded))
        return 0
    stale = owned_files() - set(files)
    if "--check" in argv:
        problems = [f"stale file {p.relative_to(HERE)}" for p in sorted(stale)]
        problems += [
            f"{path.relative_to(HERE)} differs from what {Path(__file__).name} generates"
            for path, text in sorted(files.items())
            if not path.exists() or path.read_text(encoding="utf-8") != text
        ]
        md = expected_md_verdicts()
        problems += [
            f"{conv.label} ({conversation_id(conv)}): VERDICTS here and the table in "
            "expected.md disagree"
            for conv in CONVERSATIONS
            if md.get(conv.label) != VERDICTS[conv.label][0]
        ]
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in stale:
        path.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    total = sum(len(evs) for evs in expanded.values())
    skipped = sum(ev.kind in SKIPPED for evs in expanded.values() for ev in evs)
    print(
        f"wrote {len(files)} files: {len(CONVERSATIONS)} conversations, {total} events "
        f"({skipped} of kinds no check reads, {skipped / total:.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
