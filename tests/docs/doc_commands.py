"""The shell commands the documentation shows, as a test sees them.

Every fenced block tagged ``bash`` (or ``sh``, ``shell``) in README.md and docs/*.md is read line by line:
continuation lines joined, comments dropped, each logical line cut at ``&&``, ``||``, ``;`` and ``|`` into
commands, and each ``$(...)`` inside them read as a command too. Inline code spans that start with a command
name (``seqlake``, ``sam``, ``aws``, ``make``) are commands as well, checked but not run. An untagged block
whose first line is such a command is a mistake: it would escape the checks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS: tuple[Path, ...] = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SHELL_TAGS = ("bash", "sh", "shell")
#: the first words a command of this app's documentation may start with, inline or in a block
COMMAND_WORDS = ("seqlake", ".venv/bin/seqlake", "sam", "aws", "make")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_INLINE = re.compile(r"(?<!`)`((?:\.venv/bin/)?seqlake (?:process|worker|demo|local)\b[^`]*"
                     r"|sam [a-z][^`]*|aws [a-z][^`]*|make [a-z][^`]*)`(?!`)")
_SUBST = "\0subst\0"
#: variables a command may use without the document defining them
ENVIRONMENT = frozenset({"PATH", "HOME", "PWD"})


@dataclass(frozen=True)
class Command:
    """One command as documented: where, its words (quotes removed), and whether it is in a shell block."""

    doc: str
    line: int
    argv: tuple[str, ...]
    fenced: bool
    #: variables the command assigns (``NAME=value`` alone, or ``NAME=$(...)``)
    assigns: tuple[str, ...] = ()
    #: variables it reads (``$NAME``, ``${NAME...}``)
    uses: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""

    def __str__(self) -> str:
        return f"{self.where}: {shlex.join(self.argv)}"


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    tag: str
    text: str


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of a Markdown file, with the line of their first content line."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, tag, body = i + 2, m.group(2).lower(), []
        i += 1
        while i < len(lines) and not _FENCE.match(lines[i]):
            body.append(lines[i])
            i += 1
        yield Block(path.name if path.parent == REPO else f"docs/{path.name}", start, tag, "\n".join(body))
        i += 1


def _logical_lines(text: str, first: int) -> Iterator[tuple[int, str]]:
    """(line number, text) with ``\\``-continued lines joined and comments dropped."""
    pending, start = "", first
    for n, raw in enumerate(text.splitlines(), start=first):
        if not pending:
            start = n
        line = _drop_comment(raw)
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        pending += line
        if pending.strip():
            yield start, pending.strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def _drop_comment(line: str) -> str:
    """The line without a ``#`` comment (a ``#`` outside quotes, at the start or after a blank)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _substitutions(line: str) -> tuple[str, list[str]]:
    """``line`` with each ``$(...)`` replaced by a marker, and the commands they held."""
    out, inner, i = [], [], 0
    while i < len(line):
        if line.startswith("$(", i):
            depth, j, quote = 1, i + 2, ""
            while j < len(line) and depth:
                ch = line[j]
                if quote:
                    quote = "" if ch == quote else quote
                elif ch in "'\"":
                    quote = ch
                elif ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                j += 1
            inner.append(line[i + 2:j - 1])
            out.append(_SUBST)
            i = j
        else:
            out.append(line[i])
            i += 1
    return "".join(out), inner


def _variables(text: str) -> tuple[str, ...]:
    """Variables a command line reads, outside single quotes (JMESPath and jq keep their ``$`` there)."""
    unquoted = re.sub(r"'[^']*'", "", text)
    return tuple(dict.fromkeys(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", unquoted)))


def split_commands(doc: str, line: int, text: str, *, fenced: bool) -> list[Command]:
    """The commands of one logical shell line (and of its ``$(...)``), in order."""
    text, inner = _substitutions(text)
    out: list[Command] = []
    for sub in inner:
        out += split_commands(doc, line, sub, fenced=fenced)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    for token in [*lexer, ";"]:
        if token and set(token) <= set(";&|<>"):
            if token in ("<", ">", ">>", "<<") and fenced:
                words.append(token)  # a redirection stays in the command: its target is checked
                continue
            if words:
                out.append(_command(doc, line, words, fenced))
            words = []
        else:
            words.append(token)
    return out


def _command(doc: str, line: int, words: list[str], fenced: bool) -> Command:
    """A command from its words; ``NAME=value`` words before it are its environment, alone they assign."""
    while words and words[0] in ("do", "then", "else"):  # a loop's or condition's body: the command after it
        words = words[1:]
    env = []
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        env.append(words[0])
        words = words[1:]
    assigns: list[str] = [] if words else [w.split("=", 1)[0] for w in env]
    if words and words[0] == "export":
        assigns = [w.split("=", 1)[0] for w in words[1:]]
    elif words[:2] == ["read", "-r"]:
        assigns = words[2:]
    uses = _variables(" ".join(env + words))
    argv = tuple(w.replace(_SUBST, "$(...)") for w in words)
    return Command(doc, line, argv, fenced, tuple(assigns), tuple(v for v in uses if v not in assigns))


def commands(path: Path) -> list[Command]:
    """Every command of a Markdown file: its shell blocks' and its inline ones', in document order."""
    out: list[Command] = []
    text = path.read_text()
    fenced_lines: set[int] = set()
    for b in blocks(path):
        fenced_lines.update(range(b.line - 1, b.line + b.text.count("\n") + 1))
        if b.tag not in SHELL_TAGS:
            continue
        for n, logical in _logical_lines(b.text, b.line):
            out += split_commands(b.doc, n, logical, fenced=True)
    doc = path.name if path.parent == REPO else f"docs/{path.name}"
    for n, line in enumerate(text.splitlines(), start=1):
        if n in fenced_lines:
            continue
        for m in _INLINE.finditer(line):
            # `a|b` in prose offers alternatives: the first stands for them
            span = re.sub(r"(\S+?)\|\S+", r"\1", m.group(1))
            span = span.replace("...", "")
            out += split_commands(doc, n, span, fenced=False)
    return sorted(out, key=lambda c: c.line)


def untagged_command_blocks(path: Path) -> list[Block]:
    """Blocks without a shell tag whose first line is a command: they would escape every check."""
    found = []
    for b in blocks(path):
        first = next((ln.strip() for ln in b.text.splitlines() if ln.strip()), "")
        if b.tag not in SHELL_TAGS and first.split(" ", 1)[0] in COMMAND_WORDS:
            found.append(b)
    return found


def options_in_help(text: str) -> list[str]:
    """The options a ``--help`` text names: every ``--long`` word, and ``-x`` where a line starts with it."""
    found = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))
    found |= set(re.findall(r"^\s+(-[a-zA-Z]),", text, re.MULTILINE))
    return sorted(found)
