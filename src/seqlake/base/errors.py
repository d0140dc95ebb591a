"""The error types and the process exit codes, which are a contract with AWS Batch.

The job definition's ``retryStrategy`` EXITs (does not retry) on ``EXIT_BAD_INPUT``: retrying
cannot fix a malformed file. Every other non-zero exit is retryable.
"""

from __future__ import annotations

import re

EXIT_OK = 0
#: sysexits.h EX_DATAERR: "the input data was incorrect in some way".
EXIT_BAD_INPUT = 65
#: anything else (a bug, a lost connection): Batch may retry it.
EXIT_FAILURE = 1
#: a command line that does not parse (argparse's own code), or arguments that contradict each other
EXIT_USAGE = 2


#: what an AccessDenied message of AWS names: the action and the resource ("User: ARN is not authorized to
#: perform: s3:PutObject on resource: arn:aws:s3:::bucket/key because ...")
_ACCESS_DENIED = re.compile(
    r"not authorized to perform: (?P<action>[\w-]+:[\w*-]+) on resource: \"?(?P<resource>[^\s\"]+)"
)


def access_denied(err: BaseException) -> tuple[str, str] | None:
    """``(action, resource)`` of an AWS AccessDenied error, as its message gives them; None for another error."""
    found = _ACCESS_DENIED.search(str(err))
    return (found["action"], found["resource"]) if found else None


class SeqlakeError(Exception):
    """Base class of the errors seqlake raises on purpose."""


class BadInputError(SeqlakeError):
    """The input is wrong; the message names the file, the line or record, and the problem.

    ``str(err)`` is the one line shown to users, e.g.
    ``reads_R1.fastq.gz:4: quality has 219 characters but the sequence has 220 (record 1, '@M01:1:1')``.
    """

    def __init__(self, path: str, message: str, line: int | None = None, record: int | None = None) -> None:
        self.path = path
        # one line, always: libraries (dnaio) sometimes explain on a second line
        self.message = " ".join(line.strip() for line in message.splitlines() if line.strip())
        self.line = line
        self.record = record
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"

    def __reduce__(self) -> tuple[type[BadInputError], tuple[str, str, int | None, int | None]]:
        # worker processes raise it across a process pool: keep every field through pickling
        return (type(self), (self.path, self.message, self.line, self.record))

    def to_dict(self) -> dict[str, object]:
        return {"file": self.path, "line": self.line, "record": self.record, "message": self.message,
                "error": "BadInput", "text": str(self)}


def decoded_text(path: str, data: bytes, kind: str) -> str:
    """A text input's bytes as UTF-8, or bad input naming the first byte that is not and its line (``kind``
    names the format: ``BED``, ``GFF3``)."""
    try:
        return data.decode()
    except UnicodeDecodeError as err:
        raise BadInputError(path, f"not a text {kind} file: byte {err.start} ({err.reason})",
                            line=data[:err.start].count(b"\n") + 1) from None


class UsageError(SeqlakeError):
    """Arguments that parse but do not go together (``R1`` and ``--samplesheet``): exit ``EXIT_USAGE``."""


class TruncatedStreamError(BadInputError):
    """A compressed stream (gzip, bz2, xz) that ends before its end-of-stream marker: the file was cut.

    ``record`` is the 0-based number of the first record the cut lost (the number of whole records
    before it); ``line`` is None: the one line counts records from 1, as every message does, e.g.
    ``R1.fastq.gz: gzip stream truncated after record 1234 (line 4936), the last complete record``.
    """


#: the names of the error types above that mean bad input (what a Lambda task's failure reports as its type)
BAD_INPUT_ERRORS: frozenset[str] = frozenset({BadInputError.__name__, TruncatedStreamError.__name__})
