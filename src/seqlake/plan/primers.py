"""Primer schemes (amplicon mode): a BED of primers read and checked once, when the run is planned.

The format is the ARTIC / primalscheme primer BED, in each of its generations: tab-separated ``contig,
start, end, name, pool, strand`` with 0-based half-open coordinates, and optionally a seventh column, the
primer's sequence (primerschemes.org's BEDs, ARTIC V5.3.2 / V5.4.2). A primer's name is its amplicon's name,
then ``_LEFT`` or ``_RIGHT``, then optionally a suffix that tells alternative primers of one amplicon apart:
``_alt``, ``_alt1``, ``_alt_2`` (ARTIC V1-V4.1: ``nCoV-2019_7_LEFT_alt0``) or a number (primerschemes.org:
``SARS-CoV-2_1_LEFT_1``, ``SARS-CoV-2_1_LEFT_2``). The pool is any text (``1``, ``2``, or ARTIC V1's
``nCoV-2019_1``). Comment, ``track`` and ``browser`` lines and empty lines are skipped.

A bad scheme is rejected before any child runs, as one line naming the file and the line: a line that is
not tab-separated or has fewer than six fields, coordinates that are not integers, an end at or before
its start, a contig the reference does not have, a primer past its contig's end, a strand other than
``+`` / ``-``, a sequence column with other than IUPAC bases, a name that is neither LEFT nor RIGHT, a
duplicate name, or an amplicon with a LEFT primer and no RIGHT one (or the other way round).
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from seqlake.base import storage
from seqlake.base.errors import BadInputError, decoded_text

_NAME = re.compile(r"^(?P<amplicon>.+)_(?P<side>LEFT|RIGHT)(?P<alt>_alt\w*|_\d+)?$")
#: the seventh column, where present: the primer's bases (IUPAC codes, either case)
_SEQUENCE = re.compile(r"^[ACGTUWSMKRYBDHVNacgtuwsmkrybdhvn]+$")


@dataclass(frozen=True)
class Primer:
    contig: str
    start: int  # 0-based
    end: int  # exclusive
    name: str
    amplicon: str
    pool: str
    #: ``LEFT`` or ``RIGHT`` (from the name)
    side: str
    #: on the - strand (BED column 6: what samtools ampliconclip --strand matches reads against)
    reverse: bool


@dataclass(frozen=True)
class Amplicon:
    name: str
    contig: str
    pool: str
    #: the outer ends (the LEFT primers' leftmost start, the RIGHT primers' rightmost end) and the insert
    #: between the primers (the LEFT primers' rightmost end, the RIGHT primers' leftmost start)
    start: int
    end: int
    insert_start: int
    insert_end: int

    @property
    def anchor(self) -> int:
        """The 0-based base its reads are counted on (``amplicon_reads``): the insert's first (inside the
        amplicon where primers overlap)."""
        return min(self.insert_start, self.end - 1)


@dataclass(frozen=True)
class PrimerScheme:
    primers: tuple[Primer, ...]

    @property
    def amplicons(self) -> tuple[Amplicon, ...]:
        by_name: dict[str, list[Primer]] = {}
        for p in self.primers:
            by_name.setdefault(p.amplicon, []).append(p)
        out = []
        for name, ps in by_name.items():
            left = [p for p in ps if p.side == "LEFT"]
            right = [p for p in ps if p.side == "RIGHT"]
            out.append(Amplicon(name, ps[0].contig, ps[0].pool, min(p.start for p in left),
                                max(p.end for p in right), max(p.end for p in left), min(p.start for p in right)))
        return tuple(sorted(out, key=lambda a: (a.contig, a.start, a.name)))


def _lines(text: str) -> Iterator[tuple[int, str]]:
    # split at newlines only: str.splitlines also splits at \x0b, \x0c, \x1c..., which would number
    # lines differently from the file's
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip() and not line.startswith(("#", "track ", "browser ")):
            yield number, line.rstrip("\r")


def _fields(line: str, bad: Callable[[str], BadInputError],
            contigs: Mapping[str, int] | None) -> tuple[str, int, int, str, str, str]:
    """The checked fields of one primer line."""
    fields = line.split("\t")
    if len(fields) < 6:
        raise bad("not a tab-separated primer BED line (contig, start, end, name, pool, strand)"
                  if len(fields) == 1 else f"{len(fields)} tab-separated fields, a primer BED line has 6")
    contig, start_s, end_s, name, pool, strand = (f.strip() for f in fields[:6])
    try:
        start, end = int(start_s), int(end_s)
    except ValueError:
        raise bad(f"start {start_s!r} and end {end_s!r} must be integers") from None
    if start < 0 or end <= start:
        raise bad(f"primer {name}: end {end} is not after its start {start}")
    if contigs is not None:
        if contig not in contigs:
            raise bad(f"primer {name}: contig {contig!r} is not in the reference ({', '.join(list(contigs)[:5])})")
        if end > contigs[contig]:
            raise bad(f"primer {name}: end {end} is past the end of {contig} ({contigs[contig]} bases)")
    if strand not in ("+", "-"):
        raise bad(f"primer {name}: strand {strand!r} is neither + nor -")
    if len(fields) > 6 and fields[6].strip() and not _SEQUENCE.match(fields[6].strip()):
        raise bad(f"primer {name}: column 7 {fields[6].strip()[:40]!r} is not a primer sequence (IUPAC bases)")
    return contig, start, end, name, pool, strand


def parse_primer_bed(uri: str, text: str, contigs: Mapping[str, int] | None) -> PrimerScheme:
    """The scheme of a primer BED's text (``uri`` names it in errors); ``contigs`` (name -> length), when
    given, are the reference's, which every primer must lie within."""
    primers: list[Primer] = []
    first_line: dict[str, int] = {}
    sides: dict[str, dict[str, int]] = {}
    for number, line in _lines(text):
        def bad(message: str, at: int = number) -> BadInputError:
            return BadInputError(uri, message, line=at)

        contig, start, end, name, pool, strand = _fields(line, bad, contigs)
        match = _NAME.match(name)
        if match is None:
            raise bad(f"primer name {name!r} ends in neither _LEFT nor _RIGHT")
        if name in first_line:
            raise bad(f"duplicate primer name {name} (first on line {first_line[name]})")
        first_line[name] = number
        amplicon, side = match["amplicon"], match["side"]
        sides.setdefault(amplicon, {}).setdefault(side, number)
        primers.append(Primer(contig, start, end, name, amplicon, pool, side, strand == "-"))
    if not primers:
        raise BadInputError(uri, "no primer in the BED file")
    for amplicon, seen in sides.items():
        for side, other in (("LEFT", "RIGHT"), ("RIGHT", "LEFT")):
            if side in seen and other not in seen:
                raise BadInputError(uri, f"amplicon {amplicon}: a {side} primer and no {other} primer",
                                    line=seen[side])
    return PrimerScheme(tuple(primers))


def reference_contigs(uri: str) -> dict[str, int] | None:
    """Contig name -> length of a FASTA reference (plain or gzip), read once as a stream; None for a
    prebuilt minimap2 index (its contigs are checked by the children)."""
    if uri.endswith(".mmi"):
        return None
    data = storage.read_bytes(uri)
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    out: dict[str, int] = {}
    name = None
    for line in data.split(b"\n"):
        if line.startswith(b">"):
            name = line[1:].split()[0].decode() if line[1:].strip() else f"contig{len(out) + 1}"
            out[name] = 0
        elif name is not None:
            out[name] += len(line.strip())
    return out


def content_pin(data: bytes) -> str:
    """A primer BED's identity: ``sha256:<hex>`` of its bytes (the run parameter ``primer_bed_pin``: part of the
    run id, so adding, removing or changing the BED is another run, and a BED fixed in place a new one)."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def read_primer_bed(uri: str) -> bytes:
    """A primer BED's bytes; bad input (65) naming it when it is missing or unreadable."""
    try:
        return storage.read_bytes(uri)
    except FileNotFoundError:
        raise BadInputError(uri, "no such primer BED (--primer-bed / the run parameter primer_bed)") from None
    except IsADirectoryError:
        raise BadInputError(uri, "not a file (--primer-bed / the run parameter primer_bed)") from None
    except PermissionError as err:
        raise BadInputError(uri, f"the primer BED cannot be read: {err.strerror or err}") from None


def pin_primer_bed(uri: str, reference: str | None = None) -> str:
    """Read and check a primer BED (against the reference's contigs when given), before anything is uploaded
    or planned; its :func:`content_pin`. Bad input (exit 65, ``file:line``) when it is missing or wrong."""
    data = read_primer_bed(uri)
    _parse_bytes(uri, data, reference)
    return content_pin(data)


def _parse_bytes(uri: str, data: bytes, reference: str | None) -> PrimerScheme:
    return parse_primer_bed(uri, decoded_text(uri, data, "BED"), reference_contigs(reference) if reference else None)


def load_primer_scheme(uri: str, reference: str | None, pin: str | None = None) -> PrimerScheme:
    """Read and check a primer BED (a local path or ``s3://`` URI) against the reference's contigs; with
    ``pin`` (the run's ``primer_bed_pin``), bad input if the file changed since the run started."""
    return check_primer_bytes(uri, read_primer_bed(uri), reference, pin)


def check_primer_bytes(uri: str, data: bytes, reference: str | None, pin: str | None = None) -> PrimerScheme:
    """Check a primer BED's bytes (read from ``uri``, which errors name) against the reference's contigs and,
    with ``pin``, against the content the run started with."""
    if pin is not None and content_pin(data) != pin:
        raise BadInputError(uri, f"the primer BED changed since the run started (pinned {pin[:19]}..., now "
                            f"{content_pin(data)[:19]}...): upload it again, which starts a new run")
    return _parse_bytes(uri, data, reference)


def with_primer_pin(parameters: Mapping[str, Any], reference: str | None = None) -> dict[str, Any]:
    """Run parameters with ``primer_bed_pin`` set from the BED ``primer_bed`` names as it is now (checked:
    :func:`pin_primer_bed`), or dropped when there is no BED (a pin is never taken from the caller)."""
    out = {k: v for k, v in parameters.items() if k != "primer_bed_pin"}
    if out.get("primer_bed"):
        out["primer_bed_pin"] = pin_primer_bed(str(out["primer_bed"]), reference)
    return out
