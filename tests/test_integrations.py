"""--integrations: the agent's integrations.yml names where its events are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mantle_stream.cli import main
from mantle_stream.cli.integrations import events_source
from mantle_stream.core.errors import UsageError
from mantle_stream.feeds.sql import redact
from mantle_stream.kafka.options import parse_kafka_spec

from _stores import EVENTS, SCENARIOS, example_lines, from_file, make_db, report


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "integrations.yml"
    path.write_text(text)
    return str(path)


def test_a_file_broker_is_followed_from_the_agents_directory(tmp_path: Path) -> None:
    path = write(tmp_path, "event_broker:\n  type: file\n  path: logs/events.log\n")
    assert events_source(path, live=True) == f"follow:{tmp_path}/logs/events.log"
    default = write(tmp_path, "event_broker:\n  type: file\n")
    assert events_source(default, live=False) == f"follow:{tmp_path}/rasa_event.log"


def test_an_sqlite_tracker_store_is_replayed(tmp_path: Path) -> None:
    path = write(tmp_path, "tracker_store:\n  type: SQL\n  db: rasa.db\n")
    assert events_source(path, live=False) == f"sqlite:///{tmp_path}/rasa.db"
    absolute = write(tmp_path, "tracker_store:\n  type: sql\n  dialect: sqlite\n  db: /srv/r.db\n")
    assert events_source(absolute, live=False) == "sqlite:////srv/r.db"


def test_postgresql_with_credentials_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DB_PASSWORD", "p@ss:w/rd")
    monkeypatch.setenv("DB_HOST", "db.internal")
    path = write(
        tmp_path,
        "tracker_store:\n  type: sql\n  dialect: postgresql\n  url: ${DB_HOST}\n"
        "  port: 5432\n  db: rasa\n  username: rasa\n  password: ${DB_PASSWORD}\n",
    )
    assert (
        events_source(path, live=False) == "postgresql://rasa:p%40ss%3Aw%2Frd@db.internal:5432/rasa"
    )


def test_an_unset_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    path = write(tmp_path, "tracker_store:\n  type: sql\n  password: ${NOT_SET_HERE}\n")
    with pytest.raises(UsageError) as raised:
        events_source(path, live=False)
    assert str(raised.value) == (
        "`tracker_store.password` in integrations.yml uses the environment variable "
        "`NOT_SET_HERE`, which is not set"
    )


def test_watch_prefers_the_broker_and_check_the_store(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "event_broker:\n  type: file\n  path: e.log\ntracker_store:\n  type: sql\n  db: r.db\n",
    )
    assert events_source(path, live=True).startswith("follow:")
    assert events_source(path, live=False).startswith("sqlite:///")
    # An unreadable first choice falls back to the other.
    pika = write(tmp_path, "event_broker:\n  type: pika\ntracker_store:\n  type: sql\n")
    # watch follows a SQL store: the rows written after it started are read too.
    assert events_source(pika, live=True).startswith("follow:sqlite:///")


def test_a_kafka_broker_becomes_a_kafka_source_with_its_settings(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "event_broker:\n  type: kafka\n  url: [b1:9092, b2:9092]\n  topic: events\n"
        "  partition_by_sender: true\n  sasl_username: alice\n  sasl_password: s3cr3t\n"
        "  security_protocol: SASL_SSL\n  sasl_mechanism: PLAIN\n  ssl_check_hostname: false\n",
    )
    spec = events_source(path, live=True)
    assert spec.startswith("kafka://alice:s3cr3t@b1:9092,b2:9092/events?")
    parsed = parse_kafka_spec(spec)
    assert (parsed.bootstrap, parsed.topic) == ("b1:9092,b2:9092", "events")
    assert parsed.settings == {
        "sasl.username": "alice",
        "sasl.password": "s3cr3t",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert "s3cr3t" not in redact(spec)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("event_broker:\n  type: pika\n", "`event_broker` of type `pika` cannot be read; "
         "supported: `file`, `sql`, `kafka`"),
        ("tracker_store:\n  type: redis\n", "`tracker_store` of type `redis` cannot be read; "
         "supported: `sql`"),
        ("tracker_store:\n  type: sql\n  dialect: mysql\n", "dialect `mysql`; supported: sqlite"),
        ("model_groups: []\n", "names neither an `event_broker` nor a `tracker_store`"),
        ("- a list\n", "must be a mapping"),
        ("event_broker: [1\n", "is not valid YAML"),
    ],
    ids=["pika", "redis", "mysql", "neither", "list", "bad-yaml"],
)  # fmt: skip
def test_what_cannot_be_read_says_what_can(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        events_source(write(tmp_path, text), live=True)
    assert message in str(raised.value)


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        events_source(os.fspath(tmp_path / "nope.yml"), live=False)


def test_a_batch_is_rejudged_from_the_store_integrations_yml_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # evaluate_agent's results folder plus the agent's SQLite tracker store, found
    # through its integrations.yml: one command re-judges every run, pairs it with
    # its scenario, and names the runs whose recorded verdict differs.
    make_db(tmp_path / "rasa.db", example_lines())
    integrations = write(tmp_path, "tracker_store:\n  type: sql\n  db: rasa.db\n")
    status, from_store = report(capsys, source=["--integrations", integrations])
    assert (status, from_store) == from_file(capsys)
    assert from_store["summary"]["recorded_differences"] == 2
    differing = [c for c in from_store["conversations"] if c["recorded"]["differences"]]
    assert len(differing) == 2 and len(from_store["scenarios"]) == 5


def test_events_and_integrations_together_or_neither_is_a_usage_error(tmp_path: Path) -> None:
    integrations = write(tmp_path, "event_broker:\n  type: file\n")
    both = main(["check", str(SCENARIOS), "--events", str(EVENTS), "--integrations", integrations])
    neither = main(["check", str(SCENARIOS)])
    assert (both, neither) == (2, 2)


def test_since_on_a_source_that_is_not_sql_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", str(SCENARIOS), "--events", str(EVENTS), "--since", "2026-01-01"]) == 2
    assert "--since filters rows of a SQL store" in capsys.readouterr().err


def test_a_url_is_never_a_file_pattern_and_its_password_never_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://u:secret@127.0.0.1:1/db?sslmode=disable&password=other"
    assert main(["check", str(SCENARIOS), "--events", url]) == 2
    err = capsys.readouterr().err
    assert "matches no file" not in err and "secret" not in err and "other" not in err
    assert main(["check", str(SCENARIOS), "--events", url, "--events", str(EVENTS)]) == 2
    err = capsys.readouterr().err
    assert "secret" not in err and "u:***@127.0.0.1" in err


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ("postgresql://u:s@cret@h/db", "postgresql://u:***@h/db"),
        ("follow:postgres://u:p@h/d?password=zz", "follow:postgres://u:***@h/d?password=***"),
        ("https://user:pass@rasa.example.com", "https://user:***@rasa.example.com"),
        ("postgresql://u:p@[::1]:5432/db", "postgresql://u:***@[::1]:5432/db"),
        ("sqlite:///rasa.db", "sqlite:///rasa.db"),
        ("events.jsonl", "events.jsonl"),
    ],
)
def test_passwords_in_sources_are_hidden_in_messages(spec: str, shown: str) -> None:
    from mantle_stream.feeds.sql import redact

    assert redact(spec) == shown


def test_conversation_on_a_source_that_cannot_pick_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", str(SCENARIOS), "--events", str(EVENTS), "--conversation", "x"]) == 2
    assert "--conversation picks conversations from a store" in capsys.readouterr().err


def _laughs(levels: int) -> str:
    """Nested aliases: each level ten of the one before (10**levels lists once expanded)."""
    lines = ['a0: &a0 ["lol"]']
    for n in range(1, levels + 1):
        lines.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]")
    lines.append(f"event_broker:\n  type: file\n  path: events.log\n  extra: *a{levels}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_laughs(6), "expands to more than 100000 nodes"),
        ("event_broker: &b\n  type: file\n  self: *b\n", "is inside the node `&b`"),
    ],
    ids=["billion-laughs", "self-reference"],
)
def test_aliases_that_expand_enormously_are_refused_as_in_scenario_files(
    tmp_path: Path, text: str, message: str
) -> None:
    # Expanded, the first is a million lists (a 536-byte file of this shape took
    # 20 s and 500 MiB); the second never ends. The limits are the scenario files'.
    with pytest.raises(UsageError) as raised:
        events_source(write(tmp_path, text), live=True)
    assert message in str(raised.value) and "integrations.yml" in str(raised.value)
