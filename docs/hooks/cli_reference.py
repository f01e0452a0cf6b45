"""MkDocs hook: the command-line reference page, rendered from the parser at build time.

Sits at the documentation's edge (mkdocs.yml, ``hooks:``). It builds the same
argparse parser ``mantle-stream`` runs (:mod:`mantle_stream.cli.parser`) and adds
one generated page, ``reference/cli.md``, with ``mantle-stream --help`` and each
command's ``--help`` as they print: the reference cannot drift from the code,
because nobody copies it. The page exists only in the built site; nothing is
written into the repository.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from mantle_stream.cli.parser import _commands, _parser

if TYPE_CHECKING:  # MkDocs itself only when it builds: render() is tested without it
    from mkdocs.structure.files import Files

#: The generated page's path in the site, as nav in mkdocs.yml names it.
PAGE = "reference/cli.md"
#: argparse wraps help to the terminal's width; the page is the same on every machine.
WIDTH = "100"


def render() -> str:
    """The page's Markdown: the top-level help, then each command's, in parser order."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser = _parser()
        sections = [
            "# Every command's `--help`\n",
            "Generated when the site is built, from the parser `mantle-stream` runs "
            "(`mantle_stream.cli.parser`): what `mantle-stream COMMAND --help` prints. "
            "[Command line](../cli.md) explains the options in prose.\n",
            _section("mantle-stream", parser.format_help()),
        ]
        for name, command in _commands(parser).items():
            sections.append(_section(f"mantle-stream {name}", command.format_help()))
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(sections)


def _section(title: str, text: str) -> str:
    # A fence longer than any run of backticks in the help keeps it verbatim.
    return f"## `{title}`\n\n````text\n{text.rstrip()}\n````\n"


def on_files(files: Files, config: Any, **_: Any) -> Files:
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files
