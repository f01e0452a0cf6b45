"""``--integrations PATH``: find the agent's events where its ``integrations.yml`` says.

A Mantle agent names its event broker and tracker store in
``integrations.yml`` (keys ``event_broker`` and ``tracker_store``, never
``endpoints.yml``). This module reads that file the way Rasa does — a string
value holding ``${NAME}`` has its environment variables expanded, and one
that is not set is an error naming it — and turns the section it needs into
an ``--events`` source:

* ``event_broker: {type: file, path: ...}`` → ``follow:PATH`` (default
  ``rasa_event.log``);
* ``event_broker: {type: kafka, ...}`` → ``kafka://URL/TOPIC?...`` with its
  security settings (:func:`~mantle_stream.kafka.options.spec_from_broker`);
* ``type: sql`` (broker or tracker store) → ``sqlite:///DB`` (the default
  dialect) or ``postgresql://USER:PASSWORD@HOST:PORT/DB``, behind ``follow:``
  for ``watch`` (the rows written after it started are read too).

Which section: ``watch`` follows what is being written (the event broker
first), ``check`` replays what is stored (the tracker store first); either
falls back to the other. A relative path (a file broker's ``path``, an
SQLite ``db``) is taken from the directory of ``integrations.yml``, where the
agent runs. Anything else (RabbitMQ, Redis, ...) is refused with the
list of what is supported.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote

from mantle_stream.core.errors import UsageError
from mantle_stream.core.scenario.load import MAX_SCENARIO_BYTES
from mantle_stream.core.scenario.source import YamlProblem, compose, to_plain
from mantle_stream.kafka.options import spec_from_broker

__all__ = ["SUPPORTED", "events_source", "read_integrations"]

#: Section types this version reads, by section.
SUPPORTED = {"event_broker": ("file", "sql", "kafka"), "tracker_store": ("sql",)}
_VARIABLE = re.compile(r"\$\{([^}]*)\}")


def _expand(value: Any, where: str) -> Any:
    """Expand ``${NAME}`` in every string, as Rasa does; an unset one is an error."""
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    missing = [name for name in _VARIABLE.findall(value) if name not in os.environ]
    if missing:
        names = ", ".join(f"`{name}`" for name in missing)
        several = len(missing) > 1
        raise UsageError(
            f"`{where}` in integrations.yml uses the environment variable{'s' if several else ''} "
            f"{names}, which {'are' if several else 'is'} not set"
        )
    return _VARIABLE.sub(lambda m: os.environ[m.group(1)], value)


def read_integrations(path: str) -> dict[str, Any]:
    """The sections of ``integrations.yml``, environment variables expanded.

    Loaded as scenario files are (:func:`~mantle_stream.core.scenario.source.compose`),
    under their limits: an alias inside the node it names, and aliases that
    expand past ``MAX_NODES`` nodes or ``MAX_DEPTH`` levels, are refused
    before anything is expanded.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_SCENARIO_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"cannot read `{path}`: {why}") from None
    if len(text) > MAX_SCENARIO_BYTES:
        raise UsageError(f"`{path}` is larger than {MAX_SCENARIO_BYTES >> 20} MiB")
    try:
        tree, problems = compose(text, path)
    except YamlProblem as exc:
        problems, tree = exc.diagnostics, None
    if problems:  # a duplicate key too, as for Rasa (ruamel refuses them)
        first = problems[0]
        hint = f" ({first.hint})" if first.hint else ""
        raise UsageError(
            f"`{path}` is not valid YAML: line {first.line}, column {first.col}: "
            f"{first.message}{hint}"
        )
    document = None if tree is None else to_plain(tree)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise UsageError(f"`{path}` must be a mapping of sections (event_broker, tracker_store)")
    return {str(k): _expand(v, str(k)) for k, v in document.items()}


def _sql(section: dict[str, Any], name: str, base: str) -> str:
    dialect = str(section.get("dialect") or "sqlite").lower()
    db = section.get("db")
    if dialect == "sqlite":
        path = str(db or "rasa.db")
        return "sqlite:///" + (path if os.path.isabs(path) else os.path.join(base, path))
    if dialect.startswith(("postgresql", "postgres")):
        host = section.get("url") or section.get("host") or "localhost"
        user, password = section.get("username"), section.get("password")
        auth = ""
        if user:
            auth = quote(str(user), safe="")
            if password:
                auth += ":" + quote(str(password), safe="")
            auth += "@"
        port = f":{section['port']}" if section.get("port") else ""
        return f"postgresql://{auth}{host}{port}/{quote(str(db or 'rasa'), safe='')}"
    raise UsageError(f"`{name}` uses the SQL dialect `{dialect}`; supported: sqlite, postgresql")


def _source(section: Any, name: str, base: str, live: bool) -> str:
    if not isinstance(section, dict):
        raise UsageError(f"`{name}` in integrations.yml must be a mapping with a `type`")
    kind = str(section.get("type") or "").lower()
    if name == "event_broker" and kind == "file":
        path = str(section.get("path") or "rasa_event.log")
        return "follow:" + (path if os.path.isabs(path) else os.path.join(base, path))
    if kind == "sql":  # a live run keeps reading the rows written after it started
        return ("follow:" if live else "") + _sql(section, name, base)
    if name == "event_broker" and kind == "kafka":  # as a member of a consumer group
        return spec_from_broker(section)
    supported = ", ".join(f"`{t}`" for t in SUPPORTED[name])
    raise UsageError(
        f"`{name}` of type `{kind or '(none)'}` cannot be read; supported: {supported}"
    )


def events_source(path: str, *, live: bool) -> str:
    """The ``--events`` source the agent's ``integrations.yml`` at ``path`` names:
    for a live run (``watch``) its event broker first, else its tracker store."""
    sections = read_integrations(path)
    order = ("event_broker", "tracker_store") if live else ("tracker_store", "event_broker")
    present = [name for name in order if sections.get(name) is not None]
    if not present:
        raise UsageError(f"`{path}` names neither an `event_broker` nor a `tracker_store`")
    base = os.path.dirname(os.path.abspath(path))
    errors = []
    for name in present:
        try:
            return _source(sections[name], name, base, live)
        except UsageError as exc:
            errors.append(str(exc))
    raise UsageError("; ".join(errors))
