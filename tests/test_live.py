"""The live view of ``mantle-stream watch``: golden renders and the plain fallbacks.

Snapshots are built by hand from the verdict records (no engine), rendered
into a fixed-size, colourless console and compared with ``tests/golden/live_*.txt``.
Trailing spaces are not part of the contract (rich pads table cells; editors
strip them), so lines are compared right-stripped.

Regenerate the goldens with ``UPDATE_GOLDEN=1 python -m pytest tests/test_live.py``
and read every changed file before committing it.
"""

from __future__ import annotations

import ast
import io
import re
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from rich.cells import cell_len
from rich.console import Console

from mantle_stream.core.verdicts import AssertionResult as A
from mantle_stream.core.verdicts import ConversationResult as C
from mantle_stream.core.verdicts import Decision, Statistics, Verdict
from mantle_stream.outputs.live import LiveSnapshot, LiveView, decision_line, summary_line

from _harness import check_golden as golden

CARD = "Customer replaces a damaged card"
TRANSFER = "Customer transfers money to a saved payee"
IDENTITY = "Customer verifies identity when the SMS code cannot be sent"
BALANCE = "Customer checks balance and card limits in one go"
FRAUD = "Customer disputes a card payment, checks balance midway, then cancels"

FORBIDDEN_CANNOT_HELP = (
    "agent uttered the forbidden message (agent message with response `utter_cannot_help`): "
    "\"I'm sorry, I can't help with that here. For insurance quest…\""
)
EXPRESS = (
    "tool `order_replacement` never ran as specified; closest: tool `order_replacement` "
    'ran with shipping=`"express"` (string), expected `"standard"` (string)'
)
ONE_MOMENT = (
    "agent uttered the forbidden message (agent message with text matching "
    '`(?i)(one moment|please wait|bear with me)`): "One moment, let me look up '
    'your balance."'
)
STRING_AMOUNT = (
    "memory `transfer_money.amount` was never set to `250` (integer); closest: "
    'memory `transfer_money.amount` was set to `"250"` (string), expected `250` '
    "(integer)"
)


# ---------------------------------------------------------------- rendering


def render(view: LiveView, width: int, height: int = 40, *, colour: bool = False) -> str:
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        legacy_windows=False,
        color_system="truecolor" if colour else None,
        force_terminal=colour,
    )
    console.print(view)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def plain(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def check_golden(name: str, text: str) -> None:
    golden(f"live_{name}.txt", plain(text))


# ---------------------------------------------------------------- snapshots


def mixed() -> LiveSnapshot:
    """Three conversations: one passed, one failed and stopped early, one running."""
    ok = C(
        "card-replace-ok-1",
        CARD,
        "passed",
        37,
        (
            A(0, "skill_activated", "passed", 6, "skill `card_replace` activated", 1),
            A(
                1,
                "memory_was_set",
                "passed",
                13,
                "memory `card_replace.replacement_reason` set to "
                '`"damaged"` (string); memory `card_replace.selected_card_id` set',
                2,
            ),
            A(
                2,
                "memory_was_not_set",
                "passed",
                None,
                "memory `card_replace.fraud_review` never ended with a forbidden write",
                5,
            ),
            A(3, "tool_executed", "passed", 25, "tool `order_replacement` ran", 4),
        ),
        finished=True,
        turns=5,
    )
    express = C(
        "card-replace-express-2",
        CARD,
        "failed",
        19,
        (
            A(0, "skill_activated", "passed", 6, "skill `card_replace` activated", 1),
            A(5, "tool_executed", "pending"),
            A(8, "bot_did_not_utter", "failed", 19, FORBIDDEN_CANNOT_HELP, 3),
        ),
        turns=3,
    )
    transfer = C(
        "transfer-ok-1",
        TRANSFER,
        "pending",
        11,
        (
            A(0, "skill_activated", "passed", 6, "skill `transfer_money` activated", 1),
            A(
                3,
                "tool_executed",
                "passed",
                10,
                "tool `list_payees` on MCP server `banking` ran",
                2,
            ),
            A(6, "ordered_block_interrupted", "pending"),
            A(9, "sequencing", "pending"),
        ),
        turns=2,
    )
    latest = (
        Decision(
            "transfer-ok-1",
            TRANSFER,
            3,
            "tool_executed",
            "passed",
            10,
            "tool `list_payees` on MCP server `banking` ran",
            2,
        ),
        Decision(
            "card-replace-express-2",
            CARD,
            8,
            "bot_did_not_utter",
            "failed",
            19,
            FORBIDDEN_CANNOT_HELP,
            3,
        ),
    )
    return LiveSnapshot(
        (ok, express, transfer),
        Statistics(events=67, conversations=3, open=2, passed=1, decisions=8),
        elapsed=4.25,
        events_per_second=15.8,
        latest=latest,
        stopped_early=("card-replace-express-2",),
        source="tcp://127.0.0.1:7400",
        bad_events=2,
    )


PASSES = (
    ("skill_activated", "skill `{skill}` activated"),
    ("tool_executed", "tool `lookup_{skill}` ran"),
    ("memory_was_set", "memory `{skill}.confirmed` set to `true` (boolean)"),
    ("bot_did_not_utter", "never said: agent message with response `utter_cannot_help`"),
    ("sequencing", "all 4 steps happened in order"),
    ("skill_completed", "skill `{skill}` completed"),
)
FAILURES = {
    "skill_activated": "skill `{skill}` was never activated",
    "tool_executed": "tool `lookup_{skill}` never ran as specified",
    "memory_was_set": "memory `{skill}.confirmed` was never set to `true` (boolean)",
    "bot_did_not_utter": "agent uttered the forbidden message (agent message with response "
    '`utter_cannot_help`): "Sorry, I can\'t help with that."',
    "sequencing": "step 3 of 4 never happened after step 2: skill `{skill}` completed",
    "skill_completed": "skill `{skill}` was never completed",
}


def _conv(
    cid: str,
    scenario: str,
    verdicts: str,
    events: int,
    *,
    turns: int = 3,
    finished: bool = False,
    failure: str = "",
) -> C:
    """A conversation from a verdict string: ``p`` passed, ``f`` failed, ``.`` pending.

    The first failure's reason is ``failure`` when given. Failures are decided at
    the end of a finished conversation, at an event of a running one.
    """
    skill = cid.rsplit("-", 2)[0].replace("-", "_")
    results = []
    for i, v in enumerate(verdicts):
        kind, passed = PASSES[i % len(PASSES)]
        if v == ".":
            results.append(A(i, kind, "pending"))
        elif v == "p":
            results.append(A(i, kind, "passed", 4 + 3 * i, passed.format(skill=skill), 1 + i // 3))
        else:
            reason = failure if failure and "f" not in verdicts[:i] else FAILURES[kind]
            results.append(
                A(
                    i,
                    kind,
                    "failed",
                    None if finished else 4 + 3 * i,
                    reason.format(skill=skill),
                    turns,
                )
            )
    verdict: Verdict = "failed" if "f" in verdicts else "pending" if "." in verdicts else "passed"
    return C(cid, scenario, verdict, events, tuple(results), finished, turns)


def many() -> LiveSnapshot:
    """Twelve conversations of five scenarios, in order of first event."""
    conversations = (
        _conv("card-replace-ok-1", CARD, "pppppppppppp", 37, turns=5, finished=True),
        _conv(
            "card-replace-express-2",
            CARD,
            "pfppppppfppp",
            39,
            turns=5,
            finished=True,
            failure=EXPRESS,
        ),
        _conv("card-replace-split-3", CARD, "ppp.........", 12),
        _conv("transfer-ok-1", TRANSFER, "pp........", 8, turns=2),
        _conv(
            "transfer-string-amount-2",
            TRANSFER,
            "ppfpfppppp",
            30,
            turns=4,
            finished=True,
            failure=STRING_AMOUNT,
        ),
        _conv("transfer-declined-3", TRANSFER, "..........", 2, turns=0),
        _conv("identity-ok-1", IDENTITY, "pppppppppp", 52, turns=6, finished=True),
        _conv("identity-locked-2", IDENTITY, "ppppffpffp", 48, turns=6, finished=True),
        _conv("balance-ok-1", BALANCE, "ppppppppp", 20, turns=1, finished=True),
        _conv("balance-wait-2", BALANCE, "pppf.....", 13, turns=1, failure=ONE_MOMENT),
        _conv("balance-chatty-3", BALANCE, "ppppp....", 104, turns=9),
        _conv("fraud-restarted-2", FRAUD, "ppppp......p...", 30, turns=4),
    )
    latest = (
        Decision("balance-wait-2", BALANCE, 3, "bot_did_not_utter", "failed", 13, ONE_MOMENT, 1),
        Decision(
            "card-replace-split-3",
            CARD,
            1,
            "tool_executed",
            "passed",
            11,
            "tool `check_address` ran",
            2,
        ),
        Decision(
            "card-replace-split-3",
            CARD,
            2,
            "memory_was_set",
            "passed",
            14,
            "memory `card_replace.selected_card_id` set",
            3,
        ),
    )
    return LiveSnapshot(
        conversations,
        Statistics(events=381, conversations=12, open=7, passed=3, failed=1),
        elapsed=83.37,
        events_per_second=212.4,
        latest=latest,
        stopped_early=("card-replace-express-2", "balance-wait-2"),
        source="tcp://127.0.0.1:7400",
    )


def final() -> LiveSnapshot:
    """The closing render: every conversation ended, one stopped early."""
    snap = mixed()
    ok, express, transfer = snap.conversations
    express = msgspec.structs.replace(
        express,
        finished=True,
        assertions=(
            express.assertions[0],
            A(5, "tool_executed", "failed", None, EXPRESS, 3),
            express.assertions[2],
        ),
    )
    transfer = msgspec.structs.replace(
        transfer,
        verdict="passed",
        finished=True,
        turns=5,
        events=35,
        assertions=(
            *transfer.assertions[:2],
            A(
                6,
                "ordered_block_interrupted",
                "passed",
                21,
                "ordered block `main` of skill `transfer_money` interrupted at step `confirm`",
                4,
            ),
            A(9, "sequencing", "passed", 32, "all 4 steps happened in order", 5),
        ),
    )
    return msgspec.structs.replace(
        snap,
        conversations=(ok, express, transfer),
        final=True,
        elapsed=2.14,
        events_per_second=42.5,
        bad_events=0,
        statistics=Statistics(events=91, conversations=3, passed=2, failed=1, decisions=11),
    )


def long_reason() -> LiveSnapshot:
    """A reason of a few thousand characters, a newline, an escape and an unbroken run."""
    quoted = " ".join(["One moment please, I am still looking that up for you."] * 40)
    return LiveSnapshot(
        (
            C(
                "balance-chatty-3",
                BALANCE,
                "failed",
                104,
                (
                    A(0, "skill_activated", "passed", 6, "skill `account_overview` activated", 1),
                    A(
                        6,
                        "bot_did_not_utter",
                        "failed",
                        14,
                        f'agent uttered the forbidden message:\n\x1b[31m"{quoted}"',
                        2,
                    ),
                    A(
                        7,
                        "memory_was_set",
                        "failed",
                        None,
                        "memory `" + "x" * 400 + "` was never set",
                        9,
                    ),
                ),
                turns=9,
            ),
        ),
        Statistics(events=104, conversations=1, open=1),
        elapsed=12.0,
        events_per_second=8.7,
        source="follow:/var/log/mantle/" + "very-long-directory-name/" * 6 + "events.jsonl",
    )


def empty() -> LiveSnapshot:
    return LiveSnapshot(
        (), Statistics(), elapsed=0.4, events_per_second=0.0, source="unix:/tmp/mantle.sock"
    )


def odd() -> LiveSnapshot:
    """Records at their edges: no scenario, no assertions, nothing decided, no turn."""
    return LiveSnapshot(
        (
            C("c-1", None, "pending", 1, (A(0, "skill_activated", "pending"),)),
            C("c-2", "No goals", "passed", 3, (), finished=True),
            C("c-3", "", "failed", 2, (A(0, "bot_did_not_utter", "failed", 2, ""),)),
        ),
        Statistics(events=6),
        elapsed=0.05,
        events_per_second=120.0,
    )


SNAPSHOTS: dict[str, Callable[[], LiveSnapshot]] = {
    "mixed": mixed,
    "many": many,
    "final": final,
    "long_reason": long_reason,
    "empty": empty,
    "odd": odd,
}


# ---------------------------------------------------------------- goldens


def test_detail_view_with_mixed_verdicts_at_100_columns() -> None:
    check_golden("detail_100", render(LiveView(mixed()), 100))


def test_detail_view_at_80_columns_marks_assertions_with_glyphs() -> None:
    check_golden("detail_80", render(LiveView(mixed()), 80))


def test_compact_view_with_twelve_conversations_at_80_columns() -> None:
    check_golden("compact_80", render(LiveView(many()), 80))


def test_compact_view_at_120_columns_shows_the_scenario() -> None:
    check_golden("compact_120", render(LiveView(many()), 120))


def test_compact_view_caps_rows_to_the_height_with_a_more_line() -> None:
    text = render(LiveView(many()), 80, height=16)
    check_golden("compact_capped_80", text)
    assert len(text.splitlines()) <= 16


def test_final_view_ends_with_the_summary_line() -> None:
    text = render(LiveView(final()), 80)
    check_golden("final_80", text)
    assert " ".join(text.splitlines()[-2:]) == summary_line(final())  # broken after a `;`
    assert text.splitlines()[-1] == summary_line(final())[-len(text.splitlines()[-1]) :]
    assert render(LiveView(final()), 120).splitlines()[-1] == summary_line(final())


def test_final_compact_view_keeps_room_for_the_summary() -> None:
    snap = msgspec.structs.replace(many(), final=True)
    text = render(LiveView(snap), 80, height=16)
    assert len(text.splitlines()) <= 16
    assert " ".join(text.splitlines()[-2:]) == summary_line(snap)


def test_a_very_long_reason_is_folded_and_cut_without_breaking_the_layout() -> None:
    check_golden("long_reason_80", render(LiveView(long_reason()), 80))


def test_empty_view_waits_for_the_first_conversation() -> None:
    check_golden("empty_80", render(LiveView(empty()), 80))


# ---------------------------------------------------------------- layout


BOTH = pytest.mark.parametrize("limit", [6, 0], ids=["detail", "compact"])


@BOTH
@pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_no_line_is_wider_than_the_console(name: str, width: int, limit: int) -> None:
    text = render(LiveView(SNAPSHOTS[name](), detail_limit=limit), width)
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide


@BOTH
@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_colour_changes_no_character_of_the_layout(name: str, width: int, limit: int) -> None:
    coloured = render(LiveView(SNAPSHOTS[name](), detail_limit=limit), width, colour=True)
    assert "\x1b[" in coloured
    colourless = render(LiveView(SNAPSHOTS[name](), detail_limit=limit), width)
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == colourless


def test_compact_rows_run_running_then_failed_then_passed() -> None:
    lines = render(LiveView(many()), 120).splitlines()
    table = next(i for i, line in enumerate(lines) if line.lstrip().startswith("conversation"))
    rows = [line for line in lines[table + 1 :] if re.match(r"[…✘✔][ ■] ", line)]
    marks = "".join(row[0] for row in rows)
    assert marks == "…" * 5 + "✘" * 4 + "✔" * 3


def test_compact_latest_is_the_newest_decision_else_the_first_failure() -> None:
    text = render(LiveView(many()), 120)
    split = next(line for line in text.splitlines() if "card-replace-split-3" in line)
    assert "✔ #2 memory `card_replace.selected_card" in split
    express = next(line for line in text.splitlines() if "card-replace-express-2" in line)
    assert "✘ #1 tool `order_replacement` never ran" in express


def test_a_failed_row_shows_its_failure_even_when_a_pass_came_after() -> None:
    snap = many()
    passed_later = Decision(
        "balance-wait-2",
        BALANCE,
        0,
        "skill_activated",
        "passed",
        14,
        "skill `account_overview` activated",
        1,
    )
    snap = msgspec.structs.replace(snap, latest=(*snap.latest, passed_later))
    row = next(
        line for line in render(LiveView(snap), 120).splitlines() if "balance-wait-2" in line
    )
    assert "✘ #3 agent uttered the forbidden" in row


def test_long_ids_are_cut_in_the_middle_keeping_their_tail() -> None:
    snap = many()
    ids = [f"sim-7c1e0b2a-4d5e-4f60-8a9b-{n:012x}" for n in range(12)]
    snap = msgspec.structs.replace(
        snap,
        latest=(),
        stopped_early=(),
        conversations=tuple(
            msgspec.structs.replace(c, conversation_id=cid)
            for c, cid in zip(snap.conversations, ids, strict=True)
        ),
    )
    rows = render(LiveView(snap), 100).splitlines()
    for cid in ids:  # cut, but the distinguishing tail is always shown
        assert any("sim-7c1…" in row and cid[-12:] in row for row in rows), cid


def test_detail_limit_chooses_between_sections_and_the_table() -> None:
    compact = render(LiveView(mixed(), detail_limit=2), 100).splitlines()
    assert any(line.lstrip().startswith("conversation") for line in compact[4:8])
    assert re.search(
        r"\n  ✘ failed +#1 tool_executed ",
        render(LiveView(many(), detail_limit=12), 120, height=200),
    )


@pytest.mark.parametrize(("width", "height"), [(80, 24), (160, 50)])
def test_sections_taller_than_the_screen_give_way_to_the_table(width: int, height: int) -> None:
    # Five running conversations of a dozen assertions each: a section each would
    # be cut off by the terminal mid-list, with nothing to say what is missing.
    snap = msgspec.structs.replace(
        many(), conversations=tuple(c for c in many().conversations if c.verdict == "pending")
    )
    text = render(LiveView(snap), width, height)
    check_golden(f"running_{width}x{height}", text)
    assert len(text.splitlines()) <= height
    for conv in snap.conversations:
        assert conv.conversation_id in text
    # When the sections fit, they are shown.
    tall = render(LiveView(snap), width, 200)
    assert "… pending  card-replace-split-3" in tall and "conversation " not in tall


def crowd() -> LiveSnapshot:
    """:func:`many` and eight more running conversations: twenty, nine of them running."""
    snap = many()
    more = tuple(_conv(f"card-replace-more-{n}", CARD, "pp" + "." * 10, 9) for n in range(8))
    return msgspec.structs.replace(snap, conversations=(*snap.conversations, *more))


@pytest.mark.parametrize(
    ("width", "height", "more"),
    [(80, 24, "+9 more: 2 running, 4 failed, 3 passed"), (160, 50, "")],
)
def test_rows_that_do_not_fit_end_with_how_many_more_and_what_they_are(
    width: int, height: int, more: str
) -> None:
    snap = crowd()
    text = render(LiveView(snap), width, height)
    check_golden(f"crowd_{width}x{height}", text)
    lines = text.splitlines()
    assert len(lines) <= height
    shown = [c for c in snap.conversations if c.conversation_id in text]
    if more:  # (the legend comes last)
        assert lines[-2] == more and int(more[1:].split()[0]) == 20 - len(shown)
    else:
        assert len(shown) == 20


@pytest.mark.parametrize(
    ("elapsed", "clock"),
    [
        (0.0, "00:00.0"),
        (4.25, "00:04.2"),
        (59.96, "01:00.0"),
        (3725.3, "62:05.3"),
        (-1.0, "00:00.0"),
    ],
    ids=["zero", "tenths", "rounds-up-a-minute", "past-an-hour", "negative"],
)
def test_header_shows_elapsed_as_minutes_seconds_tenths(elapsed: float, clock: str) -> None:
    snap = msgspec.structs.replace(empty(), elapsed=elapsed)
    assert f"│ unix:/tmp/mantle.sock · {clock} · 0 events" in render(LiveView(snap), 80)


def test_header_counts_bad_events_and_unjudged_conversations_only_when_present() -> None:
    quiet = render(LiveView(empty()), 120)
    assert "bad event" not in quiet and "not judged" not in quiet
    loud = msgspec.structs.replace(
        empty(), bad_events=1, statistics=Statistics(events=5, conversations=2, unmatched=2)
    )
    assert "5 events · 0 events/s · 1 bad event " in render(LiveView(loud), 120)
    assert "0 failed · 2 not judged" in render(LiveView(loud), 120)


# ---------------------------------------------------------------- purity


def test_rendering_leaves_the_snapshot_as_it_was() -> None:
    for make in SNAPSHOTS.values():
        snap = make()
        before = msgspec.json.encode(snap)
        render(LiveView(snap), 80)
        render(LiveView(snap), 120, colour=True)
        assert msgspec.json.encode(snap) == before
        assert snap == make()


def test_rendering_twice_gives_the_same_text() -> None:
    view = LiveView(many())
    assert render(view, 80) == render(view, 80)


def test_rendering_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    def no_clock() -> float:
        raise AssertionError("the live view read the clock")

    expected = render(LiveView(final()), 80)
    for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns"):
        monkeypatch.setattr(time, name, no_clock)
    assert render(LiveView(final()), 80) == expected


def test_the_view_imports_nothing_that_holds_state() -> None:
    outputs = Path(__file__).parent.parent / "mantle_stream" / "outputs"
    # The view is live.py and its parts (live_snapshot, live_text, live_detail, live_compact).
    view = sorted(outputs.glob("live*.py"))
    assert [p.name for p in view] == [
        "live.py",
        "live_compact.py",
        "live_detail.py",
        "live_snapshot.py",
        "live_text.py",
    ]
    imported: set[str | None] = set()
    for module in view:
        tree = ast.parse(module.read_text())
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
    project = {name for name in imported if name and name.startswith("mantle_stream")}
    # core.errors only for its constant table of control-character escapes.
    assert project == {
        "mantle_stream.core.errors",
        "mantle_stream.outputs.table",
        "mantle_stream.core.verdicts",
        *(f"mantle_stream.outputs.{p.stem}" for p in view if p.stem != "live"),
    }
    assert {name.split(".")[0] for name in imported if name} <= {
        "__future__",
        "collections",
        "msgspec",
        "rich",
        "mantle_stream",
    }


def test_a_snapshot_is_plain_data_that_round_trips_through_json() -> None:
    snap = many()
    assert msgspec.json.decode(msgspec.json.encode(snap), type=LiveSnapshot) == snap


# ---------------------------------------------------------------- plain lines


@pytest.mark.parametrize(
    ("decision", "line"),
    [
        (
            Decision(
                "card-replace-2",
                CARD,
                5,
                "tool_executed",
                "failed",
                19,
                'tool `order_replacement` ran with shipping=`"express"`',
                3,
            ),
            "card-replace-2  #5 tool_executed      FAILED at seq 19 (turn 3): "
            'tool `order_replacement` ran with shipping=`"express"`',
        ),
        (
            Decision(
                "c-17",
                CARD,
                3,
                "memory_was_not_set",
                "passed",
                None,
                "memory `card_replace.fraud_review` never ended with a forbidden write",
                5,
            ),
            "c-17  #3 memory_was_not_set PASSED at end (turn 5): "
            "memory `card_replace.fraud_review` never ended with a forbidden write",
        ),
        (
            Decision("c-1", FRAUD, 12, "ordered_block_interrupted", "passed", 16, "ok"),
            "c-1  #12 ordered_block_interrupted PASSED at seq 16 (turn 0): ok",
        ),
        (
            Decision(
                "c-2",
                BALANCE,
                6,
                "bot_did_not_utter",
                "failed",
                9,
                'said: "One moment,\nplease\twait\x1b[0m"',
            ),
            "c-2  #6 bot_did_not_utter  FAILED at seq 9 (turn 0): "
            'said: "One moment,\\nplease\\twait\\x1b[0m"',
        ),
    ],
    ids=["failed-at-seq", "passed-at-end", "kind-longer-than-the-pad", "control-chars-escaped"],
)
def test_decision_line(decision: Decision, line: str) -> None:
    assert decision_line(decision) == line


@pytest.mark.parametrize(
    ("snapshot", "line"),
    [
        (
            LiveSnapshot(
                (*mixed().conversations[:2], _conv("c-3", CARD, "ff", 9)),
                Statistics(events=412),
                2.1,
                196.2,
                stopped_early=("card-replace-express-2",),
            ),
            "3 conversations: 1 passed, 2 failed (1 stopped early); 412 events in 2.1 s "
            "(196 events/s)",
        ),
        (
            LiveSnapshot((_conv("c-1", CARD, "p", 1),), Statistics(events=1), 0.25, 4.0),
            "1 conversation: 1 passed, 0 failed; 1 event in 0.2 s (4.0 events/s)",
        ),
        (
            final(),
            "3 conversations: 2 passed, 1 failed (1 stopped early); 91 events in 2.1 s "
            "(42 events/s)",
        ),
        (
            msgspec.structs.replace(
                many(), final=True, bad_events=3, statistics=Statistics(events=381, unmatched=1)
            ),
            "12 conversations: 3 passed, 4 failed, 5 open (2 stopped early); "
            "381 events in 83.4 s (212 events/s); 3 bad events skipped; 1 conversation not judged",
        ),
        (empty(), "0 conversations: 0 passed, 0 failed; 0 events in 0.4 s (0 events/s)"),
    ],
    ids=["example", "singular", "final", "interrupted-with-extras", "empty"],
)
def test_summary_line(snapshot: LiveSnapshot, line: str) -> None:
    assert summary_line(snapshot) == line


def test_compact_view_has_a_row_per_scenario_with_its_runs() -> None:
    # Many conversations over several scenarios: their runs so far, failures first.
    lines = render(LiveView(many()), 120).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("scenario "))
    assert lines[header].split() == [
        "scenario", "runs", "running", "passed", "failed", "errored", "rate"
    ]  # fmt: skip
    card = next(line for line in lines if line.startswith("Customer replaces a damaged card"))
    assert card.split()[-6:] == ["3", "1", "1", "1", "0", "50%"]
    # One scenario only: no such rows.
    one = msgspec.structs.replace(
        many(), conversations=tuple(c for c in many().conversations if c.scenario == CARD)
    )
    assert not any(line.startswith("scenario ") for line in render(LiveView(one), 120).splitlines())


@pytest.mark.parametrize(("width", "height"), [(80, 24), (160, 50)])
def test_a_scenario_name_is_shown_whole_beside_the_id_or_under_it(width: int, height: int) -> None:
    # A simulator's 40-character id leaves a few letters for the scenario at 80
    # columns: the name goes on a line of its own rather than be cut to "Custom…".
    cid = "sim-b883b692-dab1-4e16-ab70-386f8c586ddf"
    snap = LiveSnapshot(
        (_conv(cid, BALANCE, "pp.......", 11, turns=1),),
        Statistics(events=11, conversations=1, open=1),
        elapsed=1.5,
        events_per_second=7.3,
        source="demo",
    )
    text = render(LiveView(snap), width, height)
    check_golden(f"heading_{width}x{height}", text)
    lines = text.splitlines()
    heading = next(i for i, line in enumerate(lines) if cid in line)
    if width < 100:
        assert lines[heading + 1].rstrip() == " " * len("… pending  ") + BALANCE
    else:
        assert f"{cid}  {BALANCE} " in lines[heading]


def test_the_scenario_column_gets_whole_names_when_the_latest_keeps_its_width() -> None:
    wide = render(LiveView(crowd()), 160, 50)
    rows = [line for line in wide.splitlines() if re.match(r"[…✘✔][ ■] ", line)]
    assert rows and all(c.scenario and c.scenario in wide for c in crowd().conversations)
    assert all(
        any(f" {name} " in row for name in (CARD, TRANSFER, IDENTITY, BALANCE, FRAUD))
        for row in rows
    )
    narrow = render(LiveView(crowd()), 80, 24)  # no room: the scenario column gives way
    assert not any("Custom" in line for line in narrow.splitlines() if re.match(r"[…✘✔]", line))


LEGEND = "✔ passed  ✘ failed  · pending  - skipped  n/m: n of m assertions decided"


@pytest.mark.parametrize(("width", "height"), [(80, 24), (160, 50)])
def test_the_table_ends_with_a_one_line_legend_of_its_marks(width: int, height: int) -> None:
    for snap in (many(), crowd(), msgspec.structs.replace(many(), final=True)):
        lines = render(LiveView(snap), width, height).splitlines()
        assert len(lines) <= height
        legend = [i for i, line in enumerate(lines) if line == LEGEND]
        assert len(legend) == 1
        # Under the table (and its "+N more"), above the summary when final.
        assert not any(re.match(r"[…✘✔][ ■] ", line) for line in lines[legend[0] + 1 :])


def test_sections_marked_by_glyphs_alone_say_what_the_glyphs_mean() -> None:
    narrow = render(LiveView(mixed()), 80).splitlines()
    assert narrow[-1] == "✔ passed  ✘ failed  … pending  - skipped"
    wide = render(LiveView(mixed()), 100)  # the marks are words: no legend
    assert "✔ passed  ✘ failed" not in wide


def test_a_legend_wider_than_the_console_flows_onto_a_second_line() -> None:
    lines = render(LiveView(many()), 60, 24).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("✔ passed  ✘ failed"))
    assert lines[at:] == [
        "✔ passed  ✘ failed  · pending  - skipped",
        "n/m: n of m assertions decided",
    ]
    assert len(lines) <= 24


@pytest.mark.parametrize(("width", "height"), [(80, 24), (160, 50)])
def test_after_ctrl_c_the_view_says_interrupted_and_counts_open_conversations(
    width: int, height: int
) -> None:
    # Ctrl-C with conversations under way: nothing runs any more, and nothing is
    # "finished" that has not finished. Every count says "open", the same number.
    snap = msgspec.structs.replace(crowd(), final=True, interrupted=True)
    text = render(LiveView(snap), width, height)
    check_golden(f"interrupted_{width}x{height}", text)
    assert len(text.splitlines()) <= height
    assert "mantle-stream watch · interrupted" in text.splitlines()[0]
    assert "finished" not in text and "running" not in text
    assert "20 conversations · 13 open · 3 passed · 4 failed" in text
    assert "3 passed, 4 failed, 13 open (2 stopped early);" in " ".join(text.splitlines())
    if height == 24:
        assert "+12 more: 5 open, 4 failed, 3 passed" in text.splitlines()


def test_a_run_ended_by_its_feed_is_finished_and_its_open_conversations_open() -> None:
    # --fail-fast: the run ended with conversations under way, but was not interrupted.
    snap = msgspec.structs.replace(mixed(), final=True)
    text = render(LiveView(snap), 100)
    assert "mantle-stream watch · finished" in text
    assert "3 conversations · 1 open · 1 passed · 1 failed" in text
    live = render(LiveView(mixed()), 100)
    assert "● live" in live and "1 running" in live


@pytest.mark.parametrize("command", ["watch", "gate", "demo"])
def test_the_title_names_the_command_drawing_the_view(command: str) -> None:
    snapshot = LiveSnapshot((), Statistics(), elapsed=0.0, events_per_second=0.0, command=command)
    assert (
        render(LiveView(snapshot), 80)
        .splitlines()[0]
        .startswith(f"╭─ mantle-stream {command} · ● live")
    )
