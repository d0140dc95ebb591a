"""Every ``seqlake`` command and argument explains itself to a user in ``--help``.

The walk covers the whole parser tree (``seqlake``, its commands, ``seqlake local``'s commands): each
argument and each command has a help text, and no help page sends the reader to a document the user
does not have (a design note, a path outside the installed package, a numbered section elsewhere).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from seqlake.cli import build_parser

#: references a user cannot follow: documents that live outside the package and its README
OUTSIDE_REFERENCE = re.compile(r"DESIGN|STYLE\.md|PROVENANCE|spikes|\.\./|\bsections? \d", re.IGNORECASE)


def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(command path, parser)`` for the parser and every sub-command under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, f"{path} {name}")


def problems(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """What a user would miss in the help of ``parser`` and everything under it."""
    found = []
    for where, p in walk(parser, path):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                described = {a.dest for a in action._choices_actions if a.help}
                found += [f"{where} {name}: command without help" for name in action.choices
                          if name not in described]
            elif not action.help or action.help == argparse.SUPPRESS:
                name = "/".join(action.option_strings) or action.dest
                found.append(f"{where} {name}: argument without help")
        for line in p.format_help().splitlines():
            if m := OUTSIDE_REFERENCE.search(line):
                found.append(f"{where}: help refers outside the package ({m.group(0)}): {line.strip()}")
    return found


def commands() -> list[str]:
    return [path for path, _ in walk(build_parser(), "seqlake")]


def test_every_argument_and_command_has_help_for_users() -> None:
    assert problems(build_parser(), "seqlake") == []


def test_the_walk_reaches_every_command() -> None:
    assert {"seqlake", "seqlake demo", "seqlake process", "seqlake worker", "seqlake local",
            "seqlake local run", "seqlake local query", "seqlake local runs"} <= set(commands())


def test_the_check_reports_what_a_user_would_miss() -> None:
    parser = argparse.ArgumentParser(prog="tool", description="see DESIGN section 5")
    parser.add_argument("--bare")
    sub = parser.add_subparsers()
    sub.add_parser("quiet").add_argument("path", help="a path, as ../shared/README.md says")
    sub.add_parser("told", help="a command with help")
    found = [p.split(": ", 2)[:2] for p in problems(parser, "tool")]
    assert found == [
        ["tool --bare", "argument without help"],
        ["tool quiet", "command without help"],
        ["tool", "help refers outside the package (DESIGN)"],
        ["tool quiet", "help refers outside the package (../)"],
    ]


@pytest.mark.parametrize("path", commands())
def test_help_prints_and_exits_zero(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*path.split()[1:], "--help"])
    assert done.value.code == 0
    assert f"usage: {path}" in capsys.readouterr().out
