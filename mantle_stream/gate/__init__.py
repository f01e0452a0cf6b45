"""The gate: mantle_stream in front of an agent, for Rasa's own simulator.

Rasa's ``evaluate_agent`` reaches the agent at one base URL and ends a run
when a reply holds no text. The gate stands on that URL: it forwards every
request unchanged (:mod:`~mantle_stream.gate.proxy`), judges each run from the
agent's tracker after every exchange (:mod:`~mantle_stream.gate.runs`), and
answers a failed run's next message with ``[]``. :mod:`~mantle_stream.gate.serve`
runs it; :mod:`~mantle_stream.gate.standin` is a stand-in agent and simulator
speaking the same protocol (the demo, the tests, the benchmark).

uvicorn and httpx (the ``mantle_stream[gate]`` extra) are imported only when a
gate runs.
"""

from __future__ import annotations

from mantle_stream.gate.proxy import GateOptions
from mantle_stream.gate.runs import GateJudge
from mantle_stream.gate.serve import Gate

__all__ = ["Gate", "GateJudge", "GateOptions"]
