"""A regular expression that backtracks catastrophically stalls no one.

``text_matches`` is searched with the ``regex`` package's time limit per
message (``--regex-timeout``, 0.05 s by default): a search that runs out makes
that assertion *errored* in that conversation (never a silent pass or fail),
other assertions and conversations go on, and ``validate`` warns about the
shape of pattern that does this.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mantle_stream as ms
from mantle_stream.core.assertions.bot import may_backtrack, nested_repetition

from _harness import scenario

ROOT = Path(__file__).resolve().parent.parent
EVIL = r"(a+)+$"
QUADRATIC = "replacement.*(ordered|placed)"  # the example scenario's own pattern


def bot_line(cid: str, seq: int, text: str) -> bytes:
    return (
        json.dumps(
            {
                "conversation_id": cid,
                "sequence": seq,
                "metadata": None,
                "bot": {"text": text, "data": {}},
            }
        ).encode()
        + b"\n"
    )


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (EVIL, "a" * 5000 + "!"),
        (r"(a|aa)+$", "a" * 40 + "!"),
        (QUADRATIC, "replacement " * 40_000),
    ],
    ids=["nested", "overlapping-alternatives-on-a-short-message", "quadratic-on-a-huge-message"],
)
def test_a_search_out_of_time_is_an_error_of_that_assertion_only(pattern: str, text: str) -> None:
    evaluator = ms.Evaluator(
        [
            scenario(
                {"bot_uttered": {"text_matches": pattern}}, {"bot_uttered": {"text_matches": "ok"}}
            )
        ],
        regex_timeout=0.05,
    )
    started = time.perf_counter()
    evaluator.push_chunk(bot_line("slow", 0, text) + bot_line("fast", 0, "ok"))
    assert time.perf_counter() - started < 2  # bounded, whatever the pattern does
    evaluator.finish_all()
    slow, fast = evaluator.results()
    assert [a.verdict for a in slow.assertions] == ["errored", "failed"]
    assert slow.assertions[0].decided_at == 0
    assert "ran out of its 0.05 s" in slow.assertions[0].reason
    assert [a.verdict for a in fast.assertions] == ["failed", "passed"]


def test_an_errored_assertion_is_a_junit_error_and_exit_status_2(tmp_path: Path) -> None:
    scen = tmp_path / "s.yml"
    scen.write_text(
        json.dumps(
            {
                "scenario": {
                    "name": "s",
                    "simulation_context": "x",
                    "goals": {"assertions": [{"bot_did_not_utter": {"text_matches": EVIL}}]},
                }
            }
        )
    )
    junit = tmp_path / "j.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mantle_stream",
            "check",
            str(scen),
            "--events",
            "-",
            "--junit",
            str(junit),
            "--regex-timeout",
            "0.05",
        ],
        input=bot_line("c", 0, "a" * 5000 + "!"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"1 assertion could not be evaluated" in proc.stdout
    assert b'type="errored"' in junit.read_bytes()


@pytest.mark.parametrize(
    ("pattern", "nested"),
    [
        ("(a+)+$", True),
        ("(.*x)*", True),
        ("((a+)b)*", True),
        ("(x{2,})+", True),
        (QUADRATIC, False),
        ("(ab)+", False),
        (r"\(a+\)+", False),
        ("[(a+)]+", False),
        ("(a{1,3})+", False),
    ],
    ids=lambda v: str(v),
)
def test_nested_unbounded_repetition_is_recognised(pattern: str, nested: bool) -> None:
    assert nested_repetition(pattern) is nested


def test_validate_warns_about_a_pattern_that_can_backtrack(tmp_path: Path) -> None:
    scen = tmp_path / "s.yml"
    scen.write_text(
        "scenario:\n  name: s\n  simulation_context: x\n  goals:\n    assertions:\n"
        "      - bot_uttered: {text_matches: '(a+)+$'}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mantle_stream", "validate", str(scen)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert f"{scen}:6: warning: `text_matches` `(a+)+$` repeats a repetition" in proc.stderr


@pytest.mark.parametrize(
    ("pattern", "risky"),
    [
        ("(a|aa)+$", True),
        ("(ab|cd)*x", True),
        ("(a+)+", True),
        ("a*a*a*b", True),
        (r"x.*y.*\d+", True),
        (r"[*+]+", False),
        (QUADRATIC, False),
        ("(?i)please wait", False),
        ("(yes|no)", False),
    ],
    ids=lambda v: str(v),
)
def test_patterns_that_may_backtrack_are_always_searched_with_the_limit(
    pattern: str, risky: bool
) -> None:
    # Others are searched with re, about ten times faster, in a message shorter
    # than LONG_TEXT characters (a longer one always gets the limit).
    assert may_backtrack(pattern) is risky


def test_another_clients_stop_message_arrives_while_an_evil_pattern_is_matched() -> None:
    # Two simulators on one loopback listener. One sends a message the evil
    # pattern backtracks on for ever (2^40 ways); right behind it, the other
    # sends the event that fails its conversation. Its stop message arrives
    # once the search is cut off (0.05 s by default): the bound below is
    # liveness, not speed — without the limit it would take well over 20 s
    # (benchmarks/latency.py --evil measures the wait).
    import anyio

    from mantle_stream.feeds import open_feed

    evaluator = ms.Evaluator(
        [
            scenario(
                {"bot_uttered": {"text_matches": EVIL}},
                {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
            )
        ]
    )
    waited: list[float] = []

    async def honest(host: str, port: int) -> None:
        async with await anyio.connect_tcp(host, port) as stream:
            await anyio.sleep(0.02)  # the evil message is in the evaluator first
            line = (
                json.dumps(
                    {
                        "conversation_id": "honest",
                        "sequence": 0,
                        "metadata": json.dumps({"utter_action": "utter_cannot_help"}),
                        "bot": {"text": "sorry", "data": {}},
                    }
                ).encode()
                + b"\n"
            )
            started = time.perf_counter()
            await stream.send(line)
            reply = b""
            while b"\n" not in reply:
                reply += await stream.receive()
            waited.append(time.perf_counter() - started)
            assert json.loads(reply.split(b"\n")[0])["conversation_id"] == "honest"
            await stream.send(
                b'{"conversation_id": "honest", "sequence": 1, "metadata": null,'
                b' "session_ended": {}}\n'
            )

    async def evil(host: str, port: int) -> None:
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(bot_line("evil", 0, "a" * 5000 + "!"))
            await stream.send(
                b'{"conversation_id": "evil", "sequence": 1, "metadata": null,'
                b' "session_ended": {}}\n'
            )
            await anyio.sleep(0.5)

    async def main() -> None:
        async with open_feed("tcp://127.0.0.1:0") as feed:
            assert feed.address is not None
            host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)
            async with anyio.create_task_group() as tg:
                tg.start_soon(evil, host, int(port))
                tg.start_soon(honest, host, int(port))
                await ms.Runner(evaluator, linger=0.2).run(feed)

    anyio.run(main)
    assert waited and waited[0] < 1.0, waited
    results = {r.conversation_id: [a.verdict for a in r.assertions] for r in evaluator.results()}
    assert results == {"evil": ["errored", "passed"], "honest": ["skipped", "failed"]}
