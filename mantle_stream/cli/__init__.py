"""The ``mantle-stream`` command line: argument parsing (:mod:`.parser`), the
commands (:mod:`.commands`) and the demo (:mod:`.demo`)."""

from mantle_stream.cli.parser import main

__all__ = ["main"]
