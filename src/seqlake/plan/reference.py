"""The run's reference: pinned by its content, indexed once before the fan-out, only loaded by children.

- **Pinned** (:func:`pin_reference`, when the run is planned): an S3 object by its ETag and size, a local
  file by its SHA-256 (one read, 2-3 s per GB here) and its size and mtime. The plan records the pin
  (:class:`ReferencePin`); before it loads the index, a child compares the reference's size and ETag (or
  mtime) with it as it does for its inputs (:func:`check_unchanged`): a reference replaced after the plan
  fails the child with that reason (bad input, exit 65), never aligns it to another genome.
- **Indexed** (:func:`seqlake.plan.refindex.ensure_index`, before the plan: by ``seqlake process``, on AWS
  by the index job, sized for it): the minimap2 index of (content, preset), keyed by both
  (:attr:`ReferencePin.key`), and beside it a small JSON of each contig's name, length and MD5 (SAM ``@SQ
  M5``), computed once from the FASTA as it streams by. Both live in seqlake's own place
  (:func:`index_store`): the lake's ``reference-indexes/`` prefix when the lake is on S3
  (:meth:`seqlake.base.layout.LakeLayout.reference_index`), else the user's cache folder
  (:func:`seqlake.base.cachedir.reference_cache`); never beside the user's FASTA. The JSON is written last,
  so its presence means the index is complete (:func:`index_ready`). A ``.mmi`` reference is its own index.
  This module imports neither mappy nor the FASTQ readers: the plan Lambda and the commit load it.
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
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from seqlake.base import storage
from seqlake.base.cachedir import reference_cache
from seqlake.base.errors import BadInputError
from seqlake.base.layout import LakeLayout

#: what is stored under a key; a change of it (the JSON's fields, how the MD5s are taken) is a new key
#: (2: the FASTA index of each contig's bases)
INDEX_FORMAT = 2
#: bytes read at once while a local reference is hashed
_BLOCK = 16 << 20


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


# ------------------------------------------------------------------------------------ children


def load_contigs(pin: ReferencePin) -> list[Contig]:
    """The reference's contigs as the index was built (its JSON)."""
    body = json.loads(storage.read_bytes(pin.contigs_uri))
    return [Contig(str(n), int(length), str(md5)) for n, length, md5 in body["contigs"]]


@dataclass(frozen=True)
class SequenceAt:
    """Where one contig's bases are, as ``samtools faidx`` indexes them (a ``.fai`` line): the byte offset of
    its first base, the bases of each full line and the bytes of each line (with its end of line)."""

    name: str
    length: int
    offset: int
    line_bases: int
    line_bytes: int

    def byte_range(self, start: int, stop: int) -> tuple[int, int]:
        """The bytes ``[a, b)`` holding bases ``[start, stop)`` (and the line ends between them)."""
        def at(base: int) -> int:
            return self.offset + base // self.line_bases * self.line_bytes + base % self.line_bases

        return at(start), at(stop - 1) + 1 if stop > start else at(start)


@dataclass(frozen=True)
class FastaIndex:
    """Where a reference's bases are: the object (the FASTA itself, or the store's one-line copy) and each
    contig's place in it (:class:`SequenceAt`)."""

    uri: str
    contigs: dict[str, SequenceAt]

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "fai": [[c.name, c.length, c.offset, c.line_bases, c.line_bytes]
                                         for c in self.contigs.values()]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FastaIndex:
        return cls(str(d["uri"]), {str(n): SequenceAt(str(n), int(a), int(b), int(c), int(e))
                                   for n, a, b, c, e in d["fai"]})


def load_fasta_index(pin: ReferencePin) -> FastaIndex:
    """Where the reference's bases are (stored in its contigs JSON when it was indexed). A FASTA indexed in
    place is read where this run's pin says it is: the index is shared by every file of the same content (a
    copy, a moved file, another run's upload), whose offsets are the same, and the one indexed first may be
    gone; the pin has checked this run's file has that content."""
    index = FastaIndex.from_json(json.loads(storage.read_bytes(pin.contigs_uri))["fasta"])
    if not pin.is_index and index.uri != LakeLayout(pin.store).reference_sequence(pin.key):
        index = FastaIndex(pin.uri, index.contigs)
    return index


def read_bases(index: FastaIndex, contig: str, start: int, stop: int) -> bytes:
    """Bases ``[start, stop)`` of ``contig`` (0-based; clipped to the contig), upper case: one ranged read of
    that slice, never the whole reference."""
    at = index.contigs[contig]
    start, stop = max(start, 0), min(stop, at.length)
    if stop <= start:
        return b""
    a, b = at.byte_range(start, stop)
    data = storage.read_range(index.uri, a, b)
    bases = data.translate(None, b"\r\n").upper() if at.line_bytes != at.line_bases else data.upper()
    if len(bases) != stop - start:
        raise BadInputError(index.uri, f"{contig}:{start + 1}-{stop} is {len(bases)} bases where its index "
                            f"says {stop - start}: the reference changed after it was indexed")
    return bases


def local_index(pin: ReferencePin) -> str:
    """A local path of the index of ``pin``: where it is stored, or this host's copy of it."""
    uri = pin.index_uri
    if not storage.is_s3(uri):
        return uri
    cached = Path(LakeLayout(str(reference_cache())).reference_index(pin.key))
    if cached.exists():
        return str(cached)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with locked(cached.parent / "lock"):
        if not cached.exists():  # else another child of this host downloaded it while this one waited
            tmp = cached.with_name(f".index.{os.getpid()}.tmp")
            storage.download(uri, tmp)
            tmp.replace(cached)
    return str(cached)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: one process per host builds or downloads an index."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


#: bytes of a reference read to check it is FASTA before minimap2 is given it
_REFERENCE_PEEK = 1 << 16


def check_reference(uri: str) -> None:
    """A FASTA reference (plain or gzip) or a minimap2 ``.mmi`` index, by its first bytes: bad input, naming
    the file and what is wrong, before any shard is planned or minimap2 is given it."""
    if uri.endswith(".mmi"):
        return
    with storage.open_read(uri) as f:
        head = f.read(_REFERENCE_PEEK)
    if head[:2] == b"\x1f\x8b":
        head = zlib.decompressobj(31).decompress(head)
    if not head.strip():
        raise BadInputError(uri, "the reference is empty")
    if not head.lstrip().startswith(b">"):
        raise BadInputError(uri, "not a FASTA reference: it does not start with a '>' header line (or give a "
                            "minimap2 .mmi index)")
    if not head.isascii():
        raise BadInputError(uri, "not a FASTA reference: it holds bytes that are not text")
