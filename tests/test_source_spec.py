"""What an --events spec names, decided once (feeds/spec.py): every place that needs
to know asks the record. Before, about fourteen prefix checks disagreed: `kafka://`
was live in one and not another, and the pytest plugin handed it to open_feed, which
said "unknown scheme"."""

from __future__ import annotations

from pathlib import Path

import pytest

from mantle_stream.feeds import open_feed
from mantle_stream.feeds.spec import KINDS, expand_pattern, parse_source
from mantle_stream.pytest_plugin._settings import _source


@pytest.mark.parametrize(
    ("spec", "scheme", "target", "live", "split", "store"),
    [
        ("events.jsonl", "path", "events.jsonl", False, True, False),
        ("runs/*.jsonl", "path", "runs/*.jsonl", False, True, False),
        ("-", "stdin", "-", False, False, False),
        ("follow:broker.log", "follow", "broker.log", True, False, False),
        ("follow:tcp://x", "follow", "tcp://x", True, False, False),  # a path named so
        ("tcp://127.0.0.1:0", "tcp", "tcp://127.0.0.1:0", True, False, False),
        ("unix:/tmp/s", "unix", "unix:/tmp/s", True, False, False),
        ("kafka://h:9092/t", "kafka", "kafka://h:9092/t", True, False, False),
        ("http://rasa:5005", "http", "http://rasa:5005", False, False, True),
        ("https://rasa", "http", "https://rasa", False, False, True),
        ("sqlite:///t.db", "sqlite", "sqlite:///t.db", False, True, True),
        ("follow:sqlite:///t.db", "sqlite", "sqlite:///t.db", True, False, True),
        ("postgres://u@h/db", "postgresql", "postgres://u@h/db", False, True, True),
        ("follow:postgresql://u@h/db", "postgresql", "postgresql://u@h/db", True, False, True),
        ("mysql://u@h/db", "unknown", "mysql://u@h/db", False, True, False),
    ],
)
def test_a_spec_is_parsed_once_into_what_it_names(
    spec: str, scheme: str, target: str, live: bool, split: bool, store: bool
) -> None:
    source = parse_source(spec)
    assert (source.scheme, source.target, source.live) == (scheme, target, live)
    assert (source.one_reader is None, source.store) == (split, store)
    assert source.local == (scheme == "path")


def test_a_password_is_never_shown() -> None:
    assert parse_source("follow:postgresql://u:secret@h/db").shown == (
        "follow:postgresql://u:***@h/db"
    )


def test_every_kind_of_source_is_opened_by_a_row_of_schemes() -> None:
    from mantle_stream.feeds import SCHEMES

    assert {k.name for k in KINDS} == set(SCHEMES)


def test_a_kafka_topic_given_as_a_feed_says_who_judges_it() -> None:
    import anyio

    from mantle_stream.core.errors import FeedError

    async def enter() -> None:
        async with open_feed("kafka://127.0.0.1:9/t"):
            pass

    with pytest.raises(FeedError, match="judged by a member of its consumer group"):
        anyio.run(enter)


def test_the_pytest_plugin_refuses_kafka_as_a_live_source(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError, match="kafka://\\) never end by themselves"):
        _source("kafka://127.0.0.1:9092/events", tmp_path, "mantle_stream_events")


def test_one_glob_expansion_for_the_cli_and_the_plugin(tmp_path: Path) -> None:
    for name in ("b.jsonl", "a.jsonl"):
        (tmp_path / name).write_text("")
    assert expand_pattern("*.jsonl", tmp_path) == [
        str(tmp_path / "a.jsonl"),
        str(tmp_path / "b.jsonl"),
    ]
    assert expand_pattern("*.none", tmp_path) == []
    assert expand_pattern("a.jsonl", tmp_path) is None  # no pattern: taken as it is
    assert expand_pattern("sqlite:///x?mode=ro", tmp_path) is None  # a URL's `?`
    assert _source("*.jsonl", tmp_path, "o") == expand_pattern("*.jsonl", tmp_path)
