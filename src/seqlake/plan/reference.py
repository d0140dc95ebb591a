"""The run's reference: pinned by its content, indexed once before the fan-out, only loaded by children.

- **Pinned** (:func:`pin_reference`, when the run is planned): an S3 object by its ETag and size, a local
  file by its SHA-256 (one read, 2-3 s per GB here) and its size and mtime. The plan records the pin
  (:class:`ReferencePin`); before it loads the index, a child compares the reference's size and ETag (or
  mtime) with it as it does for its inputs (:func:`check_unchanged`): a reference replaced after the plan
  fails the child with that reason (bad input, exit 65), never aligns it to another genome.
- **Indexed** (:func:`ensure_index`, by the planner, before the fan-out: on AWS in the index job, sized for
  it): the minimap2 index of (content, preset), keyed by both (:attr:`ReferencePin.key`), and beside it a
  small JSON of each contig's name, length and MD5 (SAM ``@SQ M5``), computed once from the FASTA as it
  streams by. Both live in seqlake's own place (:func:`index_store`): the lake's ``reference-indexes/``
  prefix when the lake is on S3 (:meth:`seqlake.base.layout.LakeLayout.reference_index`), else the
  user's cache folder (:func:`seqlake.base.cachedir.reference_cache`); never beside the user's FASTA. The
  JSON is written last, so its presence means the index is complete. A ``.mmi`` reference is its own
  index: only the JSON is written, its MD5s taken from the index's sequence (where minimap2 keeps A, C,
  G, T and N only).
- **Loaded** (:func:`local_index`): a child loads the index where it is stored when that is a local folder;
  from S3 it is downloaded once per host into the reference cache (``$SEQLAKE_REF_CACHE``, same layout),
  under a file lock, so the children of one host share one download. The contigs come from the JSON
  (:func:`load_contigs`): a child holds no contig's sequence.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from seqlake.base import storage
from seqlake.base.cachedir import reference_cache
from seqlake.base.errors import BadInputError
from seqlake.base.layout import LakeLayout

#: what is stored under a key; a change of it (the JSON's fields, how the MD5s are taken) is a new key
INDEX_FORMAT = 1
#: a reference minimap2 reads as given: plain or gzip FASTA (or a ``.mmi``)
_READABLE = ("plain", "gzip", "bgzf")
#: bytes read at once while the FASTA's contigs are digested
_BLOCK = 16 << 20
#: what SAM's ``M5`` leaves out of a sequence: every byte outside ``!``..``~`` (SAM spec 1.2.1)
_NOT_SEQUENCE = bytes(range(33)) + bytes(range(127, 256))


@dataclass(frozen=True)
class Contig:
    """A reference sequence as a run sees it: name, length and the MD5 of its uppercase sequence."""

    name: str
    length: int
    md5: str


@dataclass(frozen=True)
class ReferencePin:
    """What identifies a run's reference and where its index is (``plan.json``'s ``reference``)."""

    uri: str
    size: int
    #: the minimap2 preset the index is built for (the run's ``preset`` parameter)
    preset: str
    #: the root under which the index is stored (:func:`index_store`)
    store: str
    #: an S3 object's ETag
    etag: str | None = None
    #: a local file's SHA-256 and mtime (the digest identifies it, the mtime is what a child compares)
    sha256: str | None = None
    mtime: float | None = None

    @property
    def content(self) -> str:
        """The content's identity: ``sha256:<hex>`` or ``etag:<etag>:<size>``."""
        return f"sha256:{self.sha256}" if self.sha256 else f"etag:{self.etag}:{self.size}"

    @property
    def key(self) -> str:
        """The index's key: the content, the preset and :data:`INDEX_FORMAT` (not the URI: the same
        content under two names shares one index)."""
        ident = f"{INDEX_FORMAT}\0{self.content}\0{self.preset}"
        return hashlib.sha256(ident.encode()).hexdigest()[:24]

    @property
    def is_index(self) -> bool:
        return self.uri.endswith(".mmi")

    @property
    def index_uri(self) -> str:
        """The minimap2 index children load (a ``.mmi`` reference is its own)."""
        return self.uri if self.is_index else LakeLayout(self.store).reference_index(self.key)

    @property
    def contigs_uri(self) -> str:
        return LakeLayout(self.store).reference_contigs(self.key)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReferencePin:
        return cls(**d)


def index_store(lake_root: str) -> str:
    """Where the index of a run writing to ``lake_root`` is kept: that lake when it is on S3 (every child
    reads it there), else the user's reference cache (a local run's lake is a folder of results, and one
    index serves every run on the machine)."""
    return lake_root if storage.is_s3(lake_root) else str(reference_cache())


def pin_reference(uri: str, preset: str, store: str) -> ReferencePin:
    """The reference at ``uri`` as it is now (BadInputError when it does not exist)."""
    try:
        info = storage.head(uri)
    except FileNotFoundError as err:
        raise BadInputError(uri, "the reference does not exist") from err
    if storage.is_s3(uri):
        return ReferencePin(uri, info.size, preset, store, etag=info.etag)
    return ReferencePin(uri, info.size, preset, store, sha256=_sha256(uri), mtime=info.mtime)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def indexed_reference(uri: str, preset: str = "sr", store: str | None = None, threads: int = 1) -> ReferencePin:
    """The reference at ``uri`` pinned and indexed (in ``store``; by default the user's reference cache)."""
    pin = pin_reference(uri, preset, store or str(reference_cache()))
    ensure_index(pin, threads)
    return pin


def check_unchanged(pin: ReferencePin) -> None:
    """The reference is still the one the run was planned with (its size and ETag, or mtime)."""
    try:
        now = storage.head(pin.uri)
    except FileNotFoundError as err:
        raise BadInputError(pin.uri, "the reference was removed after the run was planned; start a new run") from err
    if now.size != pin.size or (pin.etag is not None and now.etag != pin.etag) or (
            pin.mtime is not None and now.mtime != pin.mtime):
        raise BadInputError(pin.uri, "the reference changed after the run was planned (size, ETag or mtime "
                            "differ); start a new run")


# ------------------------------------------------------------------------------------ the index


def index_ready(pin: ReferencePin) -> bool:
    """The index of ``pin`` is stored (its contigs JSON, written last, exists)."""
    return storage.exists(pin.contigs_uri)


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
    with _locked(folder / "lock"):
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
            _build_mmi(pin, local, out, [c.name for c in contigs], threads)
            if store_is_local:
                out.replace(pin.index_uri)
            else:
                storage.upload(out, pin.index_uri)
    body = {"format": INDEX_FORMAT, "key": pin.key, "reference": pin.to_dict(),
            "contigs": [[c.name, c.length, c.md5] for c in contigs]}
    storage.write_bytes(pin.contigs_uri, json.dumps(body, separators=(",", ":")).encode())


def _build_mmi(pin: ReferencePin, fasta: str, out: Path, names: list[str], threads: int) -> None:
    import mappy  # here: the plan Lambda, which never builds, carries no mappy

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
            raise BadInputError(uri, f"sequence {i + 1} is named {c.name!r}, as an earlier one", record=i)
        seen.add(c.name)
    return contigs


def fasta_contigs(path: str, uri: str | None = None) -> list[Contig]:
    """Each sequence's name (its header's first word, as minimap2 names it), length and SAM ``M5`` (MD5
    of the sequence without whitespace, uppercased), in one streaming pass over a plain or gzip FASTA."""
    from seqlake.reads.fastq import open_fastq_stream  # here: the commit Lambda loads plans without FASTQ readers

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


# ------------------------------------------------------------------------------------ children


def load_contigs(pin: ReferencePin) -> list[Contig]:
    """The reference's contigs as the index was built (its JSON)."""
    body = json.loads(storage.read_bytes(pin.contigs_uri))
    return [Contig(str(n), int(length), str(md5)) for n, length, md5 in body["contigs"]]


def local_index(pin: ReferencePin) -> str:
    """A local path of the index of ``pin``: where it is stored, or this host's copy of it."""
    uri = pin.index_uri
    if not storage.is_s3(uri):
        return uri
    cached = Path(LakeLayout(str(reference_cache())).reference_index(pin.key))
    if cached.exists():
        return str(cached)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with _locked(cached.parent / "lock"):
        if not cached.exists():  # else another child of this host downloaded it while this one waited
            tmp = cached.with_name(f".index.{os.getpid()}.tmp")
            storage.download(uri, tmp)
            tmp.replace(cached)
    return str(cached)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: one process per host builds or downloads an index."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
