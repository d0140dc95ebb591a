"""A reference's index built once, before the fan-out: by ``seqlake process`` before it plans, on AWS by the
index job (the plan Lambda and the commit carry neither mappy nor the FASTQ readers, so nothing they import
imports this module; :mod:`seqlake.plan.reference` is what they and the children use).

:func:`ensure_index` stores, under the pin's key (:attr:`ReferencePin.key`), the minimap2 index of the
reference with its preset and, written last, a small JSON of each contig's name, length and MD5 (SAM
``@SQ M5``: the sequence without whitespace, uppercased), computed in one streaming pass over the FASTA
(:func:`fasta_contigs`; minimap2's own copy of the sequence turns IUPAC codes into N), and where each
contig's bases are, so a reducer reads only its region's slice (:class:`~seqlake.plan.reference.FastaIndex`:
the FASTA's own ``.fai`` numbers when it is plain with even lines, else a one-line-per-contig copy of the
bases in the store). A ``.mmi`` reference is its own index: only the JSON and the copy are written, from
the index's sequence. A bad FASTA is one line
naming it (:class:`~seqlake.base.errors.BadInputError`): sequence before the first header, a nameless
header, two sequences of one name, no sequence at all, a compression minimap2 cannot read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from seqlake.base import storage
from seqlake.base.cachedir import reference_cache
from seqlake.base.errors import BadInputError
from seqlake.base.layout import LakeLayout
from seqlake.plan.reference import (
    INDEX_FORMAT,
    Contig,
    FastaIndex,
    ReferencePin,
    SequenceAt,
    index_ready,
    locked,
    pin_reference,
)
from seqlake.reads.fastq import open_fastq_stream

#: a reference minimap2 reads as given: plain or gzip FASTA (or a ``.mmi``)
_READABLE = ("plain", "gzip", "bgzf")
#: bytes read at once while the FASTA's contigs are digested
_BLOCK = 16 << 20
#: what SAM's ``M5`` leaves out of a sequence: every byte outside ``!``..``~`` (SAM spec 1.2.1)
_NOT_SEQUENCE = bytes(range(33)) + bytes(range(127, 256))


def indexed_reference(uri: str, preset: str = "sr", store: str | None = None, threads: int = 1) -> ReferencePin:
    """The reference at ``uri`` pinned and indexed (in ``store``; by default the user's reference cache)."""
    pin = pin_reference(uri, preset, store or str(reference_cache()))
    ensure_index(pin, threads)
    return pin


def ensure_index(pin: ReferencePin, threads: int = 1) -> None:
    """Build and store the index of ``pin`` unless it is stored already (see the module docstring).

    In a local store one process builds it (a file lock); builders of one S3 key write the same bytes,
    the contigs JSON last."""
    if index_ready(pin):
        return
    if storage.is_s3(pin.contigs_uri):
        _build(pin, threads)
        return
    folder = Path(pin.contigs_uri).parent
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / "lock"):
        if not index_ready(pin):  # another process finished it while this one waited
            _build(pin, threads)


def _build(pin: ReferencePin, threads: int) -> None:
    store_is_local = not storage.is_s3(pin.index_uri)
    with tempfile.TemporaryDirectory(prefix="seqlake-ref-") as tmp:
        local = pin.uri
        if storage.is_s3(pin.uri):
            local = str(Path(tmp, "reference.mmi" if pin.is_index else "reference"))
            storage.download(pin.uri, local)
        if pin.is_index:
            contigs = _index_contigs(pin.uri, local, pin.preset)
        else:
            contigs = fasta_contigs(local, pin.uri)
            # a local store gets the index in its own folder (one rename, no copy of gigabytes)
            out = (Path(pin.index_uri).with_name(f".index.{os.getpid()}.tmp") if store_is_local
                   else Path(tmp, "index.mmi"))
            try:
                _build_mmi(pin, local, out, [c.name for c in contigs], threads)
                if store_is_local:
                    out.replace(pin.index_uri)
                else:
                    storage.upload(out, pin.index_uri)
            finally:
                out.unlink(missing_ok=True)  # a failed build leaves nothing in the store
        fasta = _fasta_index(pin, local, contigs)
    body = {"format": INDEX_FORMAT, "key": pin.key, "reference": pin.to_dict(),
            "contigs": [[c.name, c.length, c.md5] for c in contigs], "fasta": fasta.to_json()}
    storage.write_bytes(pin.contigs_uri, json.dumps(body, separators=(",", ":")).encode())


def _fasta_index(pin: ReferencePin, local: str, contigs: list[Contig]) -> FastaIndex:
    """Where the reducers read each contig's bases: the FASTA itself when it is plain with lines of even
    width per contig (a ``samtools faidx`` index of it), else a copy of the bases in the store, each contig
    on one line (gzip, a ``.mmi``, uneven lines)."""
    if not pin.is_index:
        with open_fastq_stream(local) as (_, compression):
            plain = compression == "plain"
        even = _even_lines(local, contigs) if plain else None
        if even is not None:
            return FastaIndex(pin.uri, {c.name: c for c in even})
    target = LakeLayout(pin.store).reference_sequence(pin.key)
    places, offset = {}, 0
    with tempfile.NamedTemporaryFile(prefix="seqlake-seq-") as copy:
        for name, bases in _sequences(pin, local):
            copy.write(bases)
            places[name] = SequenceAt(name, len(bases), offset, max(len(bases), 1), max(len(bases), 1))
            offset += len(bases)
        copy.flush()
        storage.upload(copy.name, target)
    lengths = {c.name: c.length for c in contigs}
    if {n: p.length for n, p in places.items()} != lengths:
        raise BadInputError(pin.uri, "the reference's sequences changed while it was indexed")
    return FastaIndex(target, places)


def _sequences(pin: ReferencePin, local: str) -> Iterator[tuple[str, bytes]]:
    """Each contig's name and bases (as SAM M5 takes them: no whitespace), one contig at a time."""
    if pin.is_index:
        import mappy

        aligner = mappy.Aligner(local, preset=pin.preset)
        for seq_name in aligner.seq_names:
            yield seq_name, (aligner.seq(seq_name) or "").encode()
        return
    name: str | None = None
    parts: list[bytes] = []
    with open_fastq_stream(local) as (stream, _):
        for line in stream:
            if line.startswith(b">"):
                if name is not None:
                    yield name, b"".join(parts)
                name, parts = line[1:].split(None, 1)[0].decode("ascii"), []
            else:
                parts.append(line.translate(None, _NOT_SEQUENCE))
    if name is not None:
        yield name, b"".join(parts)


def _even_lines(path: str, contigs: list[Contig]) -> list[SequenceAt] | None:
    """The ``.fai`` lines of a plain FASTA whose contigs each have lines of one width (all but the last),
    as ``samtools faidx`` requires; None when one does not."""
    out: list[SequenceAt] = []
    offset = 0
    current: list[int] | None = None  # the contig's first base's offset, line bases, line bytes, bases
    short = False  # a line shorter than the first was seen (only the last may be)

    def close() -> None:
        if current is not None:
            name = contigs[len(out)].name if len(out) < len(contigs) else ""
            out.append(SequenceAt(name, current[3], current[0], current[1] or 1, current[2] or 1))

    with Path(path).open("rb") as f:
        for line in f:
            if line.startswith(b">"):
                close()
                current, short = [offset + len(line), 0, 0, 0], False
            elif current is not None:
                bases = len(line.rstrip(b"\r\n"))
                if bases != len(line.translate(None, _NOT_SEQUENCE)) or (short and (bases or line.strip())):
                    return None  # spaces inside a line, or a line after a short (last) one
                if current[1] == 0:
                    current[1], current[2] = bases, len(line)
                elif bases > current[1] or (bases == current[1] and len(line) != current[2]):
                    return None
                short = short or bases < current[1]
                current[3] += bases
            offset += len(line)
    close()
    if [(p.name, p.length) for p in out] != [(c.name, c.length) for c in contigs]:
        return None
    return out


def _build_mmi(pin: ReferencePin, fasta: str, out: Path, names: list[str], threads: int) -> None:
    import mappy  # here: importing this module costs no aligner

    aligner = mappy.Aligner(fasta, preset=pin.preset, n_threads=threads, fn_idx_out=str(out))
    if not aligner:
        raise BadInputError(pin.uri, "not a FASTA reference minimap2 can index")
    indexed = list(aligner.seq_names)
    if indexed != names:
        first = next((i for i, (a, b) in enumerate(zip(indexed, names, strict=False)) if a != b),
                     min(len(indexed), len(names)))
        raise BadInputError(pin.uri, f"minimap2 read {len(indexed)} sequences, the FASTA has {len(names)} "
                            f"(first difference: sequence {first + 1})")


def _index_contigs(uri: str, local: str, preset: str) -> list[Contig]:
    """The contigs of a ``.mmi`` reference, from the index's own sequence (one contig at a time)."""
    import mappy

    aligner = mappy.Aligner(local, preset=preset)
    if not aligner:
        raise BadInputError(uri, "not a minimap2 index")
    out = []
    for name in aligner.seq_names:
        seq = (aligner.seq(name) or "").encode()
        out.append(Contig(name, len(seq), hashlib.md5(seq, usedforsecurity=False).hexdigest()))
    return _checked(uri, out)


def _checked(uri: str, contigs: list[Contig]) -> list[Contig]:
    if not contigs:
        raise BadInputError(uri, "the reference holds no sequence")
    seen: set[str] = set()
    for i, c in enumerate(contigs):
        if c.name in seen:
            raise BadInputError(uri, f"sequence {i + 1} is named {c.name!r}, as an earlier one")
        seen.add(c.name)
    return contigs


def fasta_contigs(path: str, uri: str | None = None) -> list[Contig]:
    """Each sequence's name (its header's first word, as minimap2 names it), length and SAM ``M5`` (MD5
    of the sequence without whitespace, uppercased), in one streaming pass over a plain or gzip FASTA."""
    uri = uri or path
    with open_fastq_stream(path) as (stream, compression):
        if compression not in _READABLE:
            raise BadInputError(uri, f"a {compression} reference: minimap2 reads plain or gzip FASTA")
        return _checked(uri, _digest_fasta(stream, uri))


def _digest_fasta(stream: BinaryIO, uri: str) -> list[Contig]:
    out: list[Contig] = []
    name: str | None = None
    md5 = hashlib.md5(usedforsecurity=False)
    length = 0
    line = 1  # the line ``data[pos]`` is on
    at_line_start = True
    carry = b""  # a header line cut by the end of a block
    for block in iter(lambda: stream.read(_BLOCK), b""):
        data, carry = carry + block if carry else block, b""
        pos = 0
        while pos < len(data):
            if at_line_start and data[pos] == 0x3E:  # ">": a header
                nl = data.find(b"\n", pos)
                if nl < 0:
                    carry = data[pos:]
                    break
                if name is not None:
                    out.append(Contig(name, length, md5.hexdigest()))
                name = _header_name(data[pos + 1:nl], uri, line)
                md5, length = hashlib.md5(usedforsecurity=False), 0
                pos, line = nl + 1, line + 1
                continue
            nxt = data.find(b"\n>", pos)
            end = len(data) if nxt < 0 else nxt + 1
            piece = data[pos:end]
            seq = piece.translate(None, _NOT_SEQUENCE)
            if name is None and seq:
                blank = len(piece) - len(piece.lstrip())
                raise BadInputError(uri, "not a FASTA file: sequence before the first '>' header",
                                    line=line + piece.count(b"\n", 0, blank))
            md5.update(seq.upper())
            length += len(seq)
            line += piece.count(b"\n")
            at_line_start = piece.endswith(b"\n")
            pos = end
    if carry:  # a last header without a newline
        if name is not None:
            out.append(Contig(name, length, md5.hexdigest()))
        name, md5, length = _header_name(carry[1:], uri, line), hashlib.md5(usedforsecurity=False), 0
    if name is not None:
        out.append(Contig(name, length, md5.hexdigest()))
    return out


def _header_name(header: bytes, uri: str, line: int) -> str:
    words = header.split(None, 1)
    if not words:
        raise BadInputError(uri, "a '>' header without a name", line=line)
    try:
        return words[0].decode("ascii")
    except UnicodeDecodeError:
        raise BadInputError(uri, "a sequence name that is not ASCII", line=line) from None
