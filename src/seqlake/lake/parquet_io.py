"""Parquet parts with the :mod:`seqlake.lake.tables` schemas, on local paths or ``s3://`` via storage.

Files are written to a local temporary file first and then put in place with one upload (S3) or
rename (local), so a reader never sees half a file. zstd compression; row groups of about 500k rows
(much smaller groups compress worse: each column's dictionary and statistics are per row group).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from seqlake.base import storage
from seqlake.lake.tables import BY_NAME

ROW_GROUP_ROWS = 500_000
COMPRESSION = "zstd"


def to_arrow(table_name: str, columns: Mapping[str, Sequence[Any]], schema: pa.Schema | None = None) -> pa.Table:
    """Columns (lists or arrays) as an Arrow table with the table's schema (columns in its order)."""
    schema = schema or BY_NAME[table_name].schema
    return pa.table({f.name: pa.array(columns[f.name], type=f.type) for f in schema}, schema=schema)


def _put(local: Path, uri: str) -> None:
    """Move ``local`` to ``uri``: gone from the local disk afterwards either way (an uploaded part or slices
    object left behind held a child's scratch until its end: 122 MB of a 2 M-pair child's 1.3 GB peak)."""
    if storage.is_s3(uri):
        storage.upload(local, uri)
        local.unlink()
    else:
        dest = Path(uri)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            local.replace(dest)
        except OSError:  # another file system: copy beside the destination, then rename
            sibling = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            shutil.copyfile(local, sibling)
            sibling.replace(dest)


def put_file(local: Path, uri: str) -> None:
    """Put a finished local file at ``uri`` (one upload, or a rename on the same file system); the local file is
    gone afterwards."""
    _put(local, uri)


def write_table(uri: str, table: pa.Table) -> None:
    """Write one Parquet file at ``uri`` (replacing any previous one)."""
    with tempfile.TemporaryDirectory(prefix="seqlake-pq-", dir=_tmp_dir(uri)) as tmp:
        local = Path(tmp) / "part.parquet"
        pq.write_table(table, local, compression=COMPRESSION, row_group_size=ROW_GROUP_ROWS)
        _put(local, uri)


def _tmp_dir(uri: str) -> str | None:
    """A temporary folder on the destination's file system, so the final rename is atomic."""
    if storage.is_s3(uri):
        return None
    parent = Path(uri).parent
    parent.mkdir(parents=True, exist_ok=True)
    return str(parent)


class PartWriter:
    """Streams row batches of one table into one Parquet file, in row groups of ``row_group_rows``
    (held as Arrow until a group is complete: that is the writer's memory), kept in ``tmp_dir`` until
    :meth:`publish`. A context manager: leaving it closes the local file, published or not."""

    def __init__(self, uri: str, table_name: str, tmp_dir: str, row_group_rows: int = ROW_GROUP_ROWS,
                 schema: pa.Schema | None = None) -> None:
        self.uri = uri
        self.table_name = table_name
        self.schema = schema or BY_NAME[table_name].schema
        self.row_group_rows = row_group_rows
        self.rows = 0
        #: the file's size once closed
        self.bytes = 0
        fd, name = tempfile.mkstemp(prefix=f"{table_name}-", suffix=".parquet", dir=tmp_dir)
        os.close(fd)
        self._local = Path(name)
        self._writer = pq.ParquetWriter(self._local, self.schema, compression=COMPRESSION)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def write(self, columns: Mapping[str, Sequence[Any]]) -> None:
        """Add rows; they are held as Arrow (compact) until a whole row group can be written."""
        self.write_arrow(to_arrow(self.table_name, columns, self.schema))

    def write_arrow(self, table: pa.Table) -> None:
        """Add rows given as an Arrow table with this part's schema."""
        if table.num_rows:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            self.rows += table.num_rows
            if self._pending_rows >= self.row_group_rows:
                self._write_pending()

    def _write_pending(self) -> None:
        if self._pending_rows:
            self._writer.write_table(pa.concat_tables(self._pending), row_group_size=self.row_group_rows)
        self._pending, self._pending_rows = [], 0

    def publish(self) -> None:
        """Write the rows still held, close the file and put it at ``uri``: from here the part exists."""
        self._write_pending()
        self._writer.close()
        self.bytes = self._local.stat().st_size
        _put(self._local, self.uri)

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the local file (once :meth:`publish` has, again is a no-op): a failure publishes nothing."""
        self._writer.close()


def read_table(uri: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Read one Parquet file (local or S3)."""
    if storage.is_s3(uri):
        with storage.open_read(uri) as f:
            return pq.read_table(f, columns=columns)
    return pq.read_table(uri, columns=columns)


#: bytes read at a time from a column chunk by :func:`filtered_batches`
_READ_BUFFER = 1 << 20


def filtered_batches(uri: str, keep: str, batch_rows: int) -> Iterator[pa.Table]:
    """The rows of one Parquet file (local or S3) whose boolean column ``keep`` is true, at most
    ``batch_rows`` rows read at a time; a row group without such a row costs only that column's read.
    Memory is a batch's, whatever the file's size."""
    with contextlib.ExitStack() as stack:
        source: Any = stack.enter_context(storage.open_read(uri)) if storage.is_s3(uri) else uri
        # buffered reads of the column chunks (pages as they are decoded), not each chunk read whole
        parquet = stack.enter_context(pq.ParquetFile(source, buffer_size=_READ_BUFFER, pre_buffer=False))
        for group in range(parquet.num_row_groups):
            if not parquet.read_row_group(group, columns=[keep]).column(keep).to_numpy().any():
                continue
            for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[group]):
                rows = pa.Table.from_batches([batch])
                yield rows.filter(rows.column(keep))


@contextlib.contextmanager
def local_tmp() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="seqlake-") as tmp:
        yield tmp
