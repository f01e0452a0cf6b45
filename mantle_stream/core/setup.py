"""Which scenarios a run can be playing, from what it showed before its first user message.

Pure core. Nothing Rasa's simulator sends names a run's scenario; what tells
runs apart on the wire is their setup (``evaluate_agent`` splits a scenario's
``setup.initial_slots`` in two):

* entries for project memory fields marked ``seed: true`` travel in the
  ``/session_start`` message's metadata, under the field's **bare** name (the
  scenario may write it ``customer_authenticated`` or
  ``project.customer_authenticated``);
* every other entry is posted to ``/conversations/{id}/tracker/events`` as a
  ``slot`` event named **exactly** as the scenario writes the key.

On an event source (``check``, ``watch``) the posted slot events are not
seen; the run's memory writes before its first user message are
(:func:`shown_by_events`), and so are writes no scenario names (defaults,
``system.channel``): there a scenario is a candidate when each of its
entries is among them (``one_to_one=False``).

At the gate, a scenario is a *candidate* for a run when its ``initial_slots`` and what the
run showed match one to one: every entry the run showed is one of the
scenario's, with an equal value (:func:`~mantle_stream.core.values.strict_equal`),
and the scenario has no entry the run did not show. A run's metadata other
than ``is_simulation`` counts as shown (a seed field), so does every slot it
was sent before its first user message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mantle_stream.core.errors import EventError
from mantle_stream.core.events.model import Event, MemorySet, Payload, parse_json_value
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.values import strict_equal

__all__ = ["PROJECT_PREFIX", "SESSION_METADATA", "RunSetup", "candidates", "shown_by_events"]

#: The scope of project memory fields: a seed field's key may carry it or not.
PROJECT_PREFIX = "project."
#: The memory key Mantle records a session's start metadata under.
SESSION_METADATA = "session_started_metadata"
#: Metadata keys of the simulator's own, not the scenario's.
_SIMULATOR_KEYS = frozenset({"is_simulation", "scenario"})


@dataclass
class RunSetup:
    """What a run showed before its first user message."""

    metadata: dict[str, Any] = field(default_factory=dict)  # seed fields, bare names
    slots: dict[str, Any] = field(default_factory=dict)  # slot events, by name

    def session_start(self, metadata: Mapping[str, Any]) -> None:
        """The ``/session_start`` message's metadata."""
        self.metadata.update((k, v) for k, v in metadata.items() if k not in _SIMULATOR_KEYS)

    def slot_events(self, events: Iterable[Any]) -> None:
        """A body posted to ``tracker/events``: its ``slot`` events count."""
        for event in events:
            if isinstance(event, dict) and event.get("event") == "slot":
                name = event.get("name")
                if isinstance(name, str):
                    self.slots[name] = event.get("value")


def _matches(key: str, value: Any, setup: RunSetup, used: set[tuple[str, str]]) -> bool:
    """Whether the scenario's entry ``key: value`` is one the run showed (not yet used)."""
    if key in setup.slots and ("slot", key) not in used and strict_equal(setup.slots[key], value):
        used.add(("slot", key))
        return True
    bare = key.removeprefix(PROJECT_PREFIX)
    for name in {key, bare}:
        if (
            name in setup.metadata
            and ("seed", name) not in used
            and strict_equal(setup.metadata[name], value)
        ):
            used.add(("seed", name))
            return True
    return False


def is_candidate(scenario: Scenario, setup: RunSetup, *, one_to_one: bool = True) -> bool:
    used: set[tuple[str, str]] = set()
    if not all(_matches(k, v, setup, used) for k, v in scenario.initial_slots.items()):
        return False
    return not one_to_one or len(used) == len(setup.slots) + len(setup.metadata)


def candidates(
    scenarios: Iterable[Scenario], setup: RunSetup, *, one_to_one: bool = True
) -> list[Scenario]:
    """The scenarios whose ``initial_slots`` match what the run showed: one to one (what
    the gate saw on the wire), or, with ``one_to_one=False``, each entry of the
    scenario's among what the run showed (its events, which hold more writes)."""
    return [s for s in scenarios if is_candidate(s, setup, one_to_one=one_to_one)]


def shown_by_events(events: Iterable[tuple[Event, Payload]]) -> RunSetup:
    """A run's setup as its events show it before its first real user message (on an
    event source, where the posted slot events are not seen): the session-start
    metadata Mantle records as the memory write ``session_started_metadata`` (its
    seed fields), and the last value written to each other memory key (the initial
    slots, written before the first turn)."""
    setup = RunSetup()
    for _, payload in events:
        if type(payload) is MemorySet:
            try:
                value = parse_json_value(payload.value_json, "`memory_set.value_json`")
            except EventError:
                continue  # judged as a bad event when applied
            if payload.key == SESSION_METADATA:
                if isinstance(value, dict):
                    setup.session_start(value)
            else:
                setup.slots[payload.key] = value
    return setup
