"""One way to read and write objects, whether a URI is a local path or ``s3://bucket/key``.

S3 reads are seekable: :class:`S3RangeReader` serves ``read``/``seek`` with ranged GETs through a small
LRU cache of 1 MiB aligned blocks (the shape fsspec's ``blockcache`` uses); reads larger than the cache
go out as one GET. That is what the gzip seek-index readers need: they jump to a seek point, read a
window, then stream forward, so a shard reads little beyond its own span (a few MB per shard and
mate: the blocks around the seek point and the record skip). After a few back-to-back reads the reader switches
to one open-ended streaming GET, so a sequential scan (a shard read to its end) is not bound by
per-request latency; a seek elsewhere closes the stream and falls back to the cache. A scan that moves
forward while stepping back inside the cache (rapidgzip's index pass re-reads each MiB about three
times) misses the blocks in order: from the second such miss the blocks come from one open-ended
GET too, so the index pass of a 50 MB object is a couple of requests, not fifty.

The S3 client is the process's one (:mod:`seqlake.base.clients`): made on first use, never at import time.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import shutil
import tempfile
import threading
import types
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from seqlake.base import clients
from seqlake.base.model import ObjectRef

#: parallel GETs of :func:`read_many` (the client's connection pool is sized for it)
MAX_PARALLEL_READS = clients.MAX_PARALLEL_REQUESTS
#: size of one cached block of an S3 object
BLOCK_SIZE = 1 << 20
#: blocks kept per open S3 object
CACHE_BLOCKS = 8
#: after this many back-to-back reads, switch to one streaming GET (a scan, or a shard read to its end)
SEQUENTIAL_READS = 4

def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``."""
    if not is_s3(uri):
        raise ValueError(f"not an s3:// URI: {uri}")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri}")
    return bucket, key


def s3_client() -> Any:
    """The process's S3 client (:func:`seqlake.base.clients.client`)."""
    return clients.client("s3")


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    #: S3 ETag without quotes; None for local files
    etag: str | None = None
    #: modification time (seconds since the epoch)
    mtime: float | None = None


class S3RangeReader(io.RawIOBase):
    """A seekable, read-only view of one S3 object made of ranged GETs with an LRU block cache."""

    def __init__(self, uri: str, size: int | None = None, block_size: int = BLOCK_SIZE,
                 cache_blocks: int = CACHE_BLOCKS) -> None:
        super().__init__()
        self.uri = uri
        self._bucket, self._key = split_s3(uri)
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._size = head(uri).size if size is None else size
        held = _HELD.get().get(uri)
        if held is not None and len(held) == self._size <= block_size:  # the whole object, read beforehand
            self._cache[0] = held
        self._pos = 0
        self._block = block_size
        self._max_blocks = cache_blocks
        #: number of GET requests and bytes fetched (for tests and benchmarks)
        self.requests = 0
        self.fetched = 0
        self._last_end = -1
        self._sequential = 0
        #: back-to-back reads are served from this open-ended GET, bypassing the cache
        self._stream: _OpenEnded | None = None
        #: cache misses in block order are filled from this one
        self._fill: _OpenEnded | None = None
        self._last_miss = -2

    @property
    def name(self) -> str:
        return self.uri

    @property
    def size(self) -> int:
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise ValueError("negative seek position")
        self._pos = pos
        return pos

    def _get(self, start: int, length: int) -> bytes:
        end = min(self._size, start + length) - 1
        lean = clients.ranged_gets()
        if lean is not None:
            data = lean.get(self._bucket, self._key, start, end)
        else:
            resp = s3_client().get_object(Bucket=self._bucket, Key=self._key, Range=f"bytes={start}-{end}")
            data = resp["Body"].read()
        self.requests += 1
        self.fetched += len(data)
        return data

    def _block_data(self, b: int) -> bytes:
        data = self._cache.get(b)
        if data is None:
            data = self._miss(b)
            self._cache[b] = data
            while len(self._cache) > self._max_blocks:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(b)
        return data

    def _miss(self, b: int) -> bytes:
        """Block ``b`` from S3: from the fill stream when the misses come in block order, else one GET."""
        start = b * self._block
        in_order, self._last_miss = b == self._last_miss + 1, b
        if self._fill is not None and self._fill.pos != start:
            self._fill.close()
            self._fill = None
        if self._fill is None and in_order and start + self._block < self._size:
            self._fill = self._open_ended(start)
        if self._fill is None:
            return self._get(start, self._block)
        data = self._fill.read(min(self._block, self._size - start))
        self.fetched += len(data)
        return data

    def _open_ended(self, start: int) -> _OpenEnded:
        """A GET from ``start`` to the object's end, read as it is needed."""
        resp = s3_client().get_object(Bucket=self._bucket, Key=self._key, Range=f"bytes={start}-")
        self.requests += 1
        return _OpenEnded(resp["Body"], start)

    def _stream_read(self, size: int) -> bytes:
        """Read from an open-ended streaming GET (sequential scans: one request, no per-block latency)."""
        if self._stream is None:
            self._stream = self._open_ended(self._pos)
        data = self._stream.read(size)
        self.fetched += len(data)
        return data

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def close(self) -> None:
        self._close_stream()
        if self._fill is not None:
            self._fill.close()
            self._fill = None
        super().close()

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self._size - self._pos
        size = min(size, self._size - self._pos)
        if size <= 0:
            return b""
        start = self._pos
        if start == self._last_end:
            self._sequential += 1
        else:
            self._sequential = 0
            self._close_stream()
        self._last_end = start + size
        b0, b1 = start // self._block, (start + size - 1) // self._block
        # bytes already fetched are read from the cache, however many reads came before: a small object read
        # whole by its first GET (a plan-time sniff, then its gzip-member check) costs no second request
        cached = self._stream is None and all(b in self._cache for b in range(b0, b1 + 1))
        if not cached and (self._stream is not None or self._sequential >= SEQUENTIAL_READS):
            if self._stream is not None and self._stream.pos != start:
                self._close_stream()
            data = self._stream_read(size)
        elif not cached and size >= self._block * self._max_blocks // 2:
            # a large read would flush the cache anyway: fetch it in one GET, bypassing the cache
            data = self._get(start, size)
        else:
            off = start - b0 * self._block
            blocks = [memoryview(self._block_data(b)) for b in range(b0, b1 + 1)]
            # one copy of just the bytes asked for (joining whole blocks and then slicing copied three)
            blocks[-1] = blocks[-1][: off + size - (b1 - b0) * self._block]
            blocks[0] = blocks[0][off:]
            data = b"".join(blocks)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self.read(-1)


class _OpenEnded:
    """The body of an open-ended ranged GET and the object offset it has reached."""

    def __init__(self, body: Any, pos: int) -> None:
        self.body, self.pos = body, pos

    def read(self, size: int) -> bytes:
        """``size`` bytes (fewer only at the object's end)."""
        parts = []
        left = size
        while left:
            chunk = self.body.read(left)
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self.pos += len(data)
        return data

    def close(self) -> None:
        self.body.close()


def open_read(uri: str, buffer_size: int = 1 << 16, block_size: int = BLOCK_SIZE) -> BinaryIO:
    """A seekable binary reader of ``uri`` (close it, or use it in ``with``).

    ``block_size``: the S3 cache block, i.e. the smallest ranged GET (smaller for sparse probes).
    """
    if is_s3(uri):
        return io.BufferedReader(S3RangeReader(uri, block_size=block_size), buffer_size=buffer_size)
    return Path(uri).open("rb")


def _not_found(err: Exception) -> bool:
    from seqlake.base.model import NOT_FOUND_CODES

    return getattr(err, "response", {}).get("Error", {}).get("Code") in NOT_FOUND_CODES


def read_bytes(uri: str) -> bytes:
    """The whole object; FileNotFoundError when it does not exist (one GET: no HEAD before it)."""
    if is_s3(uri):
        from botocore.exceptions import ClientError

        bucket, key = split_s3(uri)
        try:
            data: bytes = s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as err:
            if _not_found(err):
                raise FileNotFoundError(uri) from err
            raise
        return data
    return Path(uri).read_bytes()


def read_range(uri: str, start: int, stop: int) -> bytes:
    """Bytes ``[start, stop)`` of the object (fewer at its end, none past it): one ranged GET on S3;
    FileNotFoundError when it does not exist."""
    if stop <= start:
        return b""
    if is_s3(uri):
        from botocore.exceptions import ClientError

        bucket, key = split_s3(uri)
        try:
            resp = s3_client().get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{stop - 1}")
        except ClientError as err:
            if _not_found(err):
                raise FileNotFoundError(uri) from err
            if err.response.get("Error", {}).get("Code") == "InvalidRange":  # starts past the end
                return b""
            raise
        data: bytes = resp["Body"].read()
        return data
    with Path(uri).open("rb") as f:
        f.seek(start)
        return f.read(stop - start)


def read_many(uris: Iterable[str], workers: int = MAX_PARALLEL_READS) -> Iterator[tuple[str, bytes | None]]:
    """``(uri, bytes)`` for each URI, in the given order (None for a missing object), read by up to
    ``workers`` threads with at most ``2 * workers`` reads in flight: the time is the data's and a
    fraction of the round trips, and memory is bounded whatever the number of objects."""
    return ((u, data) for (u, _, _), data in _ordered(((u, 0, -1) for u in uris), workers))


def read_many_ranges(ranges: Iterable[tuple[str, int, int]],
                     workers: int = MAX_PARALLEL_READS) -> Iterator[bytes | None]:
    """Bytes ``[start, stop)`` of each ``(uri, start, stop)``, in the given order (None for a missing
    object), read as :func:`read_many` reads (one ranged GET each)."""
    return (data for _, data in _ordered(iter(ranges), workers))


def _ordered(ranges: Iterator[tuple[str, int, int]],
             workers: int) -> Iterator[tuple[tuple[str, int, int], bytes | None]]:
    """Each range (``stop`` -1: the whole object) with its bytes, in order, by a bounded pool of threads."""

    def get(item: tuple[str, int, int]) -> bytes | None:
        uri, start, stop = item
        try:
            return read_bytes(uri) if stop < 0 else read_range(uri, start, stop)
        except FileNotFoundError:
            return None

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="seqlake-read") as pool:
        window: deque[tuple[tuple[str, int, int], Future[bytes | None]]] = deque()
        for item in ranges:
            window.append((item, pool.submit(get, item)))
            if len(window) >= 2 * workers:
                first, fut = window.popleft()
                yield first, fut.result()
        while window:
            first, fut = window.popleft()
            yield first, fut.result()


def list_sizes(prefix: str) -> dict[str, int]:
    """Every object under ``prefix`` with its size (S3: one LIST per 1,000 objects; no HEADs)."""
    if is_s3(prefix):
        bucket, key = split_s3(prefix)
        out: dict[str, int] = {}
        for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
            out.update({f"s3://{bucket}/{o['Key']}": int(o["Size"]) for o in page.get("Contents", [])})
        return out
    root = Path(prefix)
    if not root.is_dir():
        return {}
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def write_bytes(uri: str, data: bytes) -> None:
    """Write ``data`` to ``uri``; a local file appears atomically (temp file + rename), parents created."""
    if is_s3(uri):
        bucket, key = split_s3(uri)
        s3_client().put_object(Bucket=bucket, Key=key, Body=data)
        return
    path = Path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def delete(uri: str) -> None:
    """Remove the object or file; one that does not exist is not an error (S3's DeleteObject says nothing)."""
    if is_s3(uri):
        bucket, key = split_s3(uri)
        s3_client().delete_object(Bucket=bucket, Key=key)
        return
    Path(uri).unlink(missing_ok=True)


def delete_many(uris: Iterable[str], workers: int = MAX_PARALLEL_READS) -> int:
    """Remove each object or file (one that does not exist is not an error), by up to ``workers`` threads: one
    DeleteObject each on S3 (the role's ``s3:DeleteObject`` on each key, as :func:`delete`); the number asked."""
    return _each(delete, ((uri,) for uri in uris), workers, "seqlake-delete")


#: below this size a file is sent in one PUT; from it on, by the transfer manager's multipart upload
#: (its default threshold). A child's parts are mostly small: one PUT each spares the manager's threads.
SINGLE_PUT_BYTES = 8 << 20


def upload(local_path: str | Path, uri: str) -> None:
    if is_s3(uri):
        bucket, key = split_s3(uri)
        if Path(local_path).stat().st_size < SINGLE_PUT_BYTES:
            s3_client().put_object(Bucket=bucket, Key=key, Body=Path(local_path).read_bytes())
        else:
            s3_client().upload_file(str(local_path), bucket, key)
        return
    dst = Path(uri)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    shutil.copyfile(local_path, tmp)
    tmp.replace(dst)


def download(uri: str, local_path: str | Path) -> None:
    dst = Path(local_path)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if is_s3(uri):
        bucket, key = split_s3(uri)
        s3_client().download_file(bucket, key, str(dst))
        return
    shutil.copyfile(uri, dst)


def exists(uri: str) -> bool:
    if is_s3(uri):
        from botocore.exceptions import ClientError

        bucket, key = split_s3(uri)
        try:
            s3_client().head_object(Bucket=bucket, Key=key)
        except ClientError as err:
            if _not_found(err):
                return False
            raise
        return True
    return Path(uri).exists()


#: objects whose size and identity the caller already has (:func:`objects_known`)
_KNOWN: contextvars.ContextVar[Mapping[str, ObjectInfo]] = contextvars.ContextVar(
    "known_objects", default=types.MappingProxyType({}))


@contextlib.contextmanager
def objects_known(infos: Mapping[str, ObjectInfo]) -> Iterator[None]:
    """Meanwhile, in this context (and the contexts copied from it: threads do not inherit it), :func:`head`
    and the S3 reader answer for these objects without a request: their size and ETag came with the run's
    request, from the listing the start step made (a plan of 10,000 samples asked for them 20,000 times)."""
    token = _KNOWN.set({**_KNOWN.get(), **infos})
    try:
        yield
    finally:
        _KNOWN.reset(token)


#: small objects whose whole bytes the caller read beforehand (:func:`objects_held`)
_HELD: contextvars.ContextVar[Mapping[str, bytes]] = contextvars.ContextVar(
    "held_objects", default=types.MappingProxyType({}))


@contextlib.contextmanager
def objects_held(bodies: Mapping[str, bytes]) -> Iterator[None]:
    """Meanwhile, in this context (and the contexts copied from it), an S3 reader (:func:`open_read`) of one
    of these objects reads it from these bytes, without a request, when they are the whole object (its
    size as :func:`head` gives it) and fit in one of its blocks (what its first GET would have fetched)."""
    token = _HELD.set({**_HELD.get(), **bodies})
    try:
        yield
    finally:
        _HELD.reset(token)


def read_small_objects(sizes: Mapping[str, int], connections: int = clients.MANY_CONNECTIONS) -> dict[str, bytes]:
    """The whole bytes of each S3 object of ``sizes`` (URI to its size, as listed), one ranged GET each, up to
    ``connections`` in flight from this thread (:meth:`clients.RangedGets.get_many`: a plan's thousands of
    small inputs cost their round trips, not a thread each). An object not read so (missing, refused, of
    another size now, not on S3, empty; or no lean GET here) is left out: its reader asks for it again, and
    fails as it fails."""
    lean = clients.ranged_gets()
    wanted = [(uri, size) for uri, size in sizes.items() if is_s3(uri) and size > 0]
    if lean is None or not wanted:
        return {}
    got = lean.get_many([(*split_s3(uri), 0, size - 1) for uri, size in wanted], connections)
    return {uri: data for (uri, size), data in zip(wanted, got, strict=True) if data is not None and len(data) == size}


def head(uri: str) -> ObjectInfo:
    """Size and identity of an object (FileNotFoundError if it does not exist)."""
    known = _KNOWN.get().get(uri)
    if known is not None:
        return known
    if is_s3(uri):
        from botocore.exceptions import ClientError

        bucket, key = split_s3(uri)
        try:
            resp = s3_client().head_object(Bucket=bucket, Key=key)
        except ClientError as err:
            if _not_found(err):
                raise FileNotFoundError(uri) from err
            raise
        return ObjectInfo(size=int(resp["ContentLength"]), etag=str(resp["ETag"]).strip('"'),
                          mtime=resp["LastModified"].timestamp())
    st = Path(uri).stat()
    return ObjectInfo(size=st.st_size, etag=None, mtime=st.st_mtime)


def list_uris(prefix: str) -> list[str]:
    """Every object under ``prefix`` (S3: key prefix; local: files under a directory), sorted."""
    if is_s3(prefix):
        bucket, key = split_s3(prefix)
        out: list[str] = []
        for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
            out.extend(f"s3://{bucket}/{obj['Key']}" for obj in page.get("Contents", []))
        return sorted(out)
    root = Path(prefix)
    if root.is_file():
        return [str(root)]
    if not root.is_dir():
        return []
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def list_folder(prefix: str) -> list[ObjectRef]:
    """The objects directly in an ``s3://bucket/folder/`` (not in its sub-folders), with their ETag, size
    and upload time, from the listing alone: one request per 1,000 objects, none per object."""
    bucket, key = split_s3(prefix)
    out: list[ObjectRef] = []
    pages = s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key, Delimiter="/")
    for page in pages:
        out.extend(
            ObjectRef(f"s3://{bucket}/{o['Key']}", size=int(o["Size"]), etag=str(o["ETag"]).strip('"'),
                      mtime=o["LastModified"].timestamp())
            for o in page.get("Contents", [])
        )
    return out


def copy(src: str, dst: str) -> None:
    if is_s3(src) and is_s3(dst):
        sb, sk = split_s3(src)
        db, dk = split_s3(dst)
        s3_client().copy({"Bucket": sb, "Key": sk}, db, dk)
    elif is_s3(dst):
        upload(src, dst)
    elif is_s3(src):
        download(src, dst)
    else:
        upload(src, dst)


#: a piece of a file to join (:func:`concatenate`): bytes, or bytes ``[start, stop)`` of an object
Source = bytes | tuple[str, int, int]
#: S3's smallest part of a multipart upload (every part but the last)
MIN_PART_BYTES = 5 << 20
#: a joined file smaller than this is read and written whole (one PUT); from it on, S3 joins it
WHOLE_JOIN_BYTES = 8 << 20


def _source_size(piece: Source) -> int:
    return len(piece) if isinstance(piece, bytes) else piece[2] - piece[1]


def _source_chunks(piece: Source) -> Iterator[bytes]:
    """A piece's bytes, at most :data:`MIN_PART_BYTES` at a time."""
    if isinstance(piece, bytes):
        yield piece
        return
    uri, start, stop = piece
    for at in range(start, stop, MIN_PART_BYTES):
        yield read_range(uri, at, min(at + MIN_PART_BYTES, stop))


def concatenate(dst: str, pieces: Sequence[Source]) -> None:
    """Write ``dst`` as the pieces one after the other, holding at most about two parts' bytes.

    A small file (< :data:`WHOLE_JOIN_BYTES`), or a local one, is read piece by piece and written (locally
    through a temporary file, atomically). A large one on S3 is a multipart upload: a piece of an object in
    the same bucket of at least :data:`MIN_PART_BYTES` is copied by S3 (``UploadPartCopy`` with its byte
    range); smaller pieces are read and sent together, topped up from the next large piece where they fall
    short of a part's minimum (every part but the last must have 5 MiB)."""
    total = sum(_source_size(p) for p in pieces)
    if not is_s3(dst):
        path = Path(dst)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                for piece in pieces:
                    for data in _source_chunks(piece):
                        out.write(data)
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return
    if total < WHOLE_JOIN_BYTES:
        write_bytes(dst, b"".join(data for p in pieces for data in _source_chunks(p)))
        return
    _multipart_join(dst, pieces)


def _multipart_join(dst: str, pieces: Sequence[Source]) -> None:
    client = s3_client()
    bucket, key = split_s3(dst)
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts: list[dict[str, Any]] = []
    buffer = bytearray()

    def send() -> None:
        resp = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=len(parts) + 1,
                                  Body=bytes(buffer))
        parts.append({"PartNumber": len(parts) + 1, "ETag": resp["ETag"]})
        buffer.clear()

    try:
        for piece in pieces:
            if isinstance(piece, bytes) or _source_size(piece) < MIN_PART_BYTES or not is_s3(piece[0]):
                for data in _source_chunks(piece):
                    buffer += data
                    if len(buffer) >= MIN_PART_BYTES:
                        send()
                continue
            uri, start, stop = piece
            if buffer:  # top the small pieces up to a part from this one, then send them
                take = max(MIN_PART_BYTES - len(buffer), 0)
                buffer += read_range(uri, start, start + take)
                start += take
                send()
                if stop - start < MIN_PART_BYTES:
                    buffer += read_range(uri, start, stop)
                    continue
            src_bucket, src_key = split_s3(uri)
            resp = client.upload_part_copy(Bucket=bucket, Key=key, UploadId=upload, PartNumber=len(parts) + 1,
                                           CopySource={"Bucket": src_bucket, "Key": src_key},
                                           CopySourceRange=f"bytes={start}-{stop - 1}")
            parts.append({"PartNumber": len(parts) + 1, "ETag": resp["CopyPartResult"]["ETag"]})
        if buffer or not parts:
            send()
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    except BaseException:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        raise




#: the size of each part of a copy too large for one CopyObject (:func:`copy_many`): 10,000 parts of 1 GiB
#: copy the largest object S3 holds (5 TB)
COPY_PART_BYTES = 1 << 30


def copy_many(copies: Iterable[tuple[str, str, int]], workers: int = MAX_PARALLEL_READS) -> int:
    """Copy each ``(source, destination, size)``, by up to ``workers`` threads with at most ``2 * workers``
    copies in flight; the number copied. On S3 the copy is the server's (CopyObject, or UploadPartCopy in
    parts of :data:`COPY_PART_BYTES` past :data:`seqlake.base.limits.S3_COPY_OBJECT`): no byte passes
    through this process. Locally a hard link where the file system allows one (files are replaced whole,
    never written in place, so the two names never see a change), else a copy."""
    return _each(_copy_one, copies, workers, "seqlake-copy")


def _each(task: Callable[..., None], calls: Iterable[tuple[Any, ...]], workers: int, name: str) -> int:
    """``task(*args)`` for each of ``calls`` by up to ``workers`` threads, at most ``2 * workers`` in flight (the
    first error is raised); the number of calls."""
    done = 0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
        window: deque[Future[None]] = deque()
        for args in calls:
            window.append(pool.submit(task, *args))
            if len(window) >= 2 * workers:
                window.popleft().result()
                done += 1
        while window:
            window.popleft().result()
            done += 1
    return done


def _copy_one(src: str, dst: str, size: int) -> None:
    from seqlake.base.limits import S3_COPY_OBJECT

    if not (is_s3(src) and is_s3(dst)):
        _link_or_copy(Path(src), Path(dst))
        return
    sb, sk = split_s3(src)
    db, dk = split_s3(dst)
    s3 = s3_client()
    if size <= S3_COPY_OBJECT.value:
        s3.copy_object(Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk})
        return
    upload_id = s3.create_multipart_upload(Bucket=db, Key=dk)["UploadId"]
    try:
        parts = []
        for number, start in enumerate(range(0, size, COPY_PART_BYTES), 1):
            stop = min(start + COPY_PART_BYTES, size) - 1
            got = s3.upload_part_copy(Bucket=db, Key=dk, UploadId=upload_id, PartNumber=number,
                                      CopySource={"Bucket": sb, "Key": sk}, CopySourceRange=f"bytes={start}-{stop}")
            parts.append({"PartNumber": number, "ETag": got["CopyPartResult"]["ETag"]})
        s3.complete_multipart_upload(Bucket=db, Key=dk, UploadId=upload_id, MultipartUpload={"Parts": parts})
    except BaseException:
        with contextlib.suppress(Exception):
            s3.abort_multipart_upload(Bucket=db, Key=dk, UploadId=upload_id)
        raise


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:  # another file system, or one without hard links
        shutil.copyfile(src, tmp)
    tmp.replace(dst)


def join(base: str, *parts: str) -> str:
    """Join path parts with ``/`` for S3 and the OS separator locally; ``base`` may end with ``/``."""
    if is_s3(base):
        out = base.rstrip("/")
        for p in parts:
            out += "/" + p.strip("/")
        return out
    return str(Path(base, *parts))


def basename(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1] if is_s3(uri) else Path(uri).name


def local_parent(path: str) -> Path:
    """The folder of a local path (for resolving paths relative to a file)."""
    return Path(path).resolve().parent
