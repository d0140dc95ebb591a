"""A reference's index built once, before the fan-out: by ``seqlake process`` before it plans, on AWS by the
index job (the plan Lambda and the commit carry neither mappy nor the FASTQ readers, so nothing they import
imports this module; :mod:`seqlake.plan.reference` is what they and the children use).

:func:`ensure_index` stores, under the pin's key (:attr:`ReferencePin.key`), the minimap2 index of the
reference with its preset and, written last, a small JSON of each contig's name, length and MD5 (SAM
``@SQ M5``: the sequence without whitespace, uppercased), computed in one streaming pass over the FASTA
(:func:`fasta_contigs`; minimap2's own copy of the sequence turns IUPAC codes into N). A ``.mmi``
reference is its own index: only the JSON is written, from the index's sequence. A bad FASTA is one line
naming it (:class:`~seqlake.base.errors.BadInputError`): sequence before the first header, a nameless
header, two sequences of one name, no sequence at all, a compression minimap2 cannot read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import BinaryIO

from seqlake.base import storage
from seqlake.base.cachedir import reference_cache
from seqlake.base.errors import BadInputError
from seqlake.plan.reference import INDEX_FORMAT, Contig, ReferencePin, index_ready, locked, pin_reference
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
    body = {"format": INDEX_FORMAT, "key": pin.key, "reference": pin.to_dict(),
            "contigs": [[c.name, c.length, c.md5] for c in contigs]}
    storage.write_bytes(pin.contigs_uri, json.dumps(body, separators=(",", ":")).encode())


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
