"""pyiceberg for the local cloud's Athena and its state folder: the tables' files read from the state folder's
mirror of the bucket (:class:`MirrorFileIO`), the Glue columns of a table Glue creates as Iceberg
(:func:`schema_from_glue_columns`), and pyiceberg's thread pool joined after each use (:func:`no_threads_left`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO

if TYPE_CHECKING:
    from pyiceberg.schema import Schema

_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})


#: the ``py-io-impl`` of :class:`MirrorFileIO`
MIRROR_FILE_IO = "localcloud.iceberg.MirrorFileIO"


class MirrorFileIO(PyArrowFileIO):
    """``s3://bucket/key`` as ``<localcloud.objects-root>/bucket/key``, a folder mirroring the buckets (the local
    cloud's state folder): local queries read the tables there as they read Hive partitions, and an app's
    maintenance commands commit there with no local cloud running (:mod:`.state_catalog`)."""

    ROOT = "localcloud.objects-root"

    def _initialize_fs(self, scheme: str, netloc: str | None = None) -> pafs.FileSystem:
        if scheme in _S3_SCHEMES:  # pyarrow's own local files: a query reads them at native speed
            return pafs.SubTreeFileSystem(str(self.properties[self.ROOT]), pafs.LocalFileSystem())
        return super()._initialize_fs(scheme, netloc)

    def new_output(self, location: str) -> PyArrowFile:
        """A file to write; its folder made first (S3 has no folders, a local file system does)."""
        scheme, _, path = self.parse_location(location)  # path: bucket/key
        if scheme in _S3_SCHEMES:
            (Path(str(self.properties[self.ROOT])) / path).parent.mkdir(parents=True, exist_ok=True)
        return super().new_output(location)


#: callers inside :func:`no_threads_left` now, in any thread (the pool is shut down when the last one leaves)
_pool_users = [0]
_pool_lock = threading.Lock()


@contextmanager
def no_threads_left() -> Iterator[None]:
    """Use pyiceberg inside; on leaving (when no other thread of the process is inside too) pyiceberg's
    process-wide thread pool is shut down and its threads joined, so that the process (a test's, the local
    cloud's) can fork afterwards. The app's own commits keep their own count (``seqlake.lake.iceberg``): in
    one process the two are not used at once (the local Athena reads while no commit runs in the process)."""
    with _pool_lock:
        _pool_users[0] += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_users[0] -= 1
            if _pool_users[0] == 0:
                from pyiceberg.utils.concurrent import ExecutorFactory

                pool, ExecutorFactory._instance = ExecutorFactory._instance, None
                if pool is not None and ExecutorFactory._instance_pid == os.getpid():
                    pool.shutdown(wait=True)


#: Glue (Hive DDL) column types -> Iceberg's, as Glue reads a table's columns when it creates its Iceberg table
_GLUE_TO_ICEBERG: dict[str, str] = {
    "string": "StringType", "bigint": "LongType", "int": "IntegerType", "smallint": "IntegerType",
    "tinyint": "IntegerType", "double": "DoubleType", "boolean": "BooleanType", "timestamp": "TimestamptzType",
}


def schema_from_glue_columns(columns: Sequence[Mapping[str, Any]]) -> Schema:
    """An Iceberg schema of Glue columns (``[{"Name", "Type", "Comment"}]``), ids 1..n in order, all optional."""
    from pyiceberg import types
    from pyiceberg.schema import Schema

    return Schema(*[types.NestedField(i, str(c["Name"]), getattr(types, _GLUE_TO_ICEBERG[str(c["Type"])])(),
                                      required=False, doc=c.get("Comment"))
                    for i, c in enumerate(columns, start=1)])
