"""What a file's name says: FASTQ or samplesheet, which sample, which mate, and its other mate's name.

The one home of these conventions. The start function reads runs from names (a pair is two names that
differ in the mate token), ``seqlake local run`` names the keys it uploads so that the start function
reads them back, and the template's EventBridge rule lets through exactly the names
:func:`kind_of` accepts (``tests/aws/test_events.py`` ties its wildcards to :data:`FASTQ_SUFFIXES`).

Mate files follow Illumina's bcl2fastq and SRA's conventions: ``<sample>_R1_001.fastq.gz``,
``<sample>_S1_L001_R2_001.fastq.gz``, ``<sample>_1.fq``, ``<sample>.2.fastq.gz``. Dependency-free (the
standard library only): the start function imports it on every upload.
"""

from __future__ import annotations

import re
from typing import Literal

#: the FASTQ file name endings the app accepts, longest first (``.fastq.gz`` before ``.fastq``)
FASTQ_SUFFIXES: tuple[str, ...] = (".fastq.gz", ".fq.gz", ".fastq", ".fq")
#: a folder's samplesheet: its runs are the sheet's samples
SAMPLESHEET_NAME = "samplesheet.csv"

Kind = Literal["fastq", "samplesheet", "other"]

#: ``<sample>_R1_001.fastq.gz``, ``<sample>_1.fq``, ... -> sample and mate
_MATE_RE = re.compile(
    r"^(?P<sample>.+?)(?:_S\d+)?(?:_L\d{3})?[._](?:R(?P<r>[12])|(?P<n>[12]))(?:_001)?\.(?:fastq|fq)(?:\.gz)?$"
)
_SINGLE_RE = re.compile(r"^(?P<sample>.+?)\.(?:fastq|fq)(?:\.gz)?$")
#: a mate token left at the end of a stem whose name the strict pattern did not read (any case)
_LOOSE_MATE_SUFFIX = re.compile(r"([._](R?[12])(_001)?)$", re.IGNORECASE)
#: compression suffixes of names that are not FASTQ names (``run7.txt.gz``)
_COMPRESSION_SUFFIXES = (".gz", ".bgz", ".bz2", ".xz")
_KEY_UNSAFE = re.compile(r"[^0-9A-Za-z_.-]+")


def base_name(key: str) -> str:
    """The last part of a key or path (``incoming/a/x.fq`` -> ``x.fq``)."""
    return key.rsplit("/", 1)[-1]


def folder_of(key: str) -> str:
    """The key's folder with its trailing slash (``incoming/batch1/x.fq`` -> ``incoming/batch1/``)."""
    return key[: len(key) - len(base_name(key))]


def fastq_suffix(name: str) -> str | None:
    """The FASTQ suffix a name ends with, as written (any case), or None."""
    lower = name.lower()
    return next((name[-len(s):] for s in FASTQ_SUFFIXES if lower.endswith(s)), None)


def kind_of(key: str) -> Kind:
    """``fastq``, ``samplesheet`` or ``other``, by name."""
    name = base_name(key)
    if name == SAMPLESHEET_NAME:
        return "samplesheet"
    if fastq_suffix(name) is not None:
        return "fastq"
    return "other"


def strip_fastq_suffix(name: str) -> str:
    suffix = fastq_suffix(name)
    return name[: -len(suffix)] if suffix else name


def mate_from_name(name: str) -> tuple[str, int | None] | None:
    """``("sample", 1 | 2)`` for a mate file name, ``("sample", None)`` for a single FASTQ, None otherwise.

    Recognises ``_R1`` / ``_R2`` and ``_1`` / ``_2`` (also with ``.`` before them), with or without
    Illumina's ``_S<n>``, ``_L<lane>`` and ``_001`` parts, on ``.fastq`` / ``.fq`` with optional ``.gz``.
    """
    base = base_name(name)
    m = _MATE_RE.match(base)
    if m:
        return m.group("sample"), int(m.group("r") or m.group("n"))
    m = _SINGLE_RE.match(base)
    if m:
        return m.group("sample"), None
    return None


def sample_from_filename(name: str) -> tuple[str, int | None]:
    """Sample name and mate of a FASTQ file name; an unrecognised name gives its stem and None."""
    parsed = mate_from_name(name)
    if parsed is not None:
        return parsed
    base = base_name(name)
    for ext in _COMPRESSION_SUFFIXES:
        base = base.removesuffix(ext)
    return base.rsplit(".", 1)[0] if "." in base else base, None


def key_safe_sample_name(name: str) -> str:
    """``reads_R1.fastq.gz`` -> ``reads``: the sample :func:`mate_from_name` reads (Illumina's
    ``_S1_L001`` parts dropped; a mate token in any case dropped too), made safe for a key."""
    parsed = mate_from_name(name)
    stem = parsed[0] if parsed is not None else _LOOSE_MATE_SUFFIX.sub("", strip_fastq_suffix(base_name(name)))
    return _KEY_UNSAFE.sub("-", stem).strip("-.") or "sample"


def partner_names(name: str) -> list[str]:
    """Names the other mate of ``name`` may have, most likely first; empty for a single FASTQ.

    The other mate has the same name with ``R1``<->``R2`` (or ``1``<->``2``) swapped in the mate token
    that :func:`mate_from_name` recognised, and any of the FASTQ suffixes (R1 as ``.fastq.gz`` with R2
    as ``.fq.gz`` is unusual but legal), its own first.
    """
    parsed = mate_from_name(name)
    if parsed is None or parsed[1] is None:
        return []
    sample, mate = parsed
    other = 2 if mate == 1 else 1
    suffix = fastq_suffix(name) or ""
    stem = name[: len(name) - len(suffix)]
    # the mate token is the last R1/_1/.1 before the optional _001 and the suffix
    for token, swapped in ((f"R{mate}", f"R{other}"), (f"_{mate}", f"_{other}"), (f".{mate}", f".{other}")):
        pos = stem.rfind(token)
        if pos < 0:
            continue
        new_stem = stem[:pos] + swapped + stem[pos + len(token):]
        if mate_from_name(new_stem + suffix) == (sample, other):
            return [new_stem + s for s in (suffix, *[x for x in FASTQ_SUFFIXES if x != suffix])]
    return []
