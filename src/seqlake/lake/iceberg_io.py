"""Iceberg's file IO over :mod:`seqlake.base.storage`: S3 through boto3, as every other read and write here.

pyiceberg reads and writes ``s3://`` through pyarrow's S3 file system, which the Lambda layer leaves out
(layers/Makefile: ``libarrow_s3`` is 10+ MB and S3 goes through boto3 here) and which would not see the
local cloud's endpoint or the clients' retry and connection settings. :class:`StorageFileIO` is pyiceberg's
own ``PyArrowFileIO`` with ``s3`` answered by :class:`StorageFileSystem`, a pyarrow file system handler over
``storage`` (ranged reads with its block cache, one PUT per file written, DeleteObject). Local paths stay
pyarrow's. Catalogs take it as ``{"py-io-impl": FILE_IO}``.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import PyArrowFileIO

from seqlake.base import storage

#: the ``py-io-impl`` catalog property naming this file IO
FILE_IO = "seqlake.lake.iceberg_io.StorageFileIO"
_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})


class _UploadOnClose(io.BytesIO):
    """A file Iceberg writes (metadata, manifests, a rewritten data file): one PUT when it is closed."""

    def __init__(self, uri: str) -> None:
        super().__init__()
        self.uri = uri

    def close(self) -> None:
        if not self.closed:
            storage.write_bytes(self.uri, self.getvalue())
        super().close()


class StorageFileSystem(pafs.FileSystemHandler):  # type: ignore[misc]
    """``bucket/key`` paths (how pyiceberg hands an ``s3://`` location to a file system) through storage."""

    @staticmethod
    def _uri(path: str) -> str:
        return "s3://" + path.removeprefix("s3://").lstrip("/")

    def get_type_name(self) -> str:
        return "seqlake-storage"

    def equals(self, other: Any) -> bool:
        return isinstance(other, StorageFileSystem)

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        out = []
        for path in paths:
            try:
                size = storage.head(self._uri(path)).size
            except FileNotFoundError:
                out.append(pafs.FileInfo(path, pafs.FileType.NotFound))
                continue
            out.append(pafs.FileInfo(path, pafs.FileType.File, size=size))
        return out

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        prefix = self._uri(selector.base_dir).rstrip("/") + "/"
        return [pafs.FileInfo(uri.removeprefix("s3://"), pafs.FileType.File, size=size)
                for uri, size in sorted(storage.list_sizes(prefix).items())]

    def create_dir(self, path: str, recursive: bool) -> None:
        """S3 has no folders: a key's prefix exists once an object has it."""

    def delete_dir(self, path: str) -> None:
        raise NotImplementedError("Iceberg deletes files, never folders")

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise NotImplementedError("Iceberg deletes files, never folders")

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("Iceberg deletes files, never folders")

    def delete_file(self, path: str) -> None:
        storage.delete(self._uri(path))

    def move(self, src: str, dest: str) -> None:
        raise NotImplementedError("Iceberg never renames a file")

    def copy_file(self, src: str, dest: str) -> None:
        storage.copy(self._uri(src), self._uri(dest))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(storage.open_read(self._uri(path)), mode="r")

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(storage.open_read(self._uri(path)), mode="r")

    def open_output_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        return pa.PythonFile(_UploadOnClose(self._uri(path)), mode="w")

    def open_append_stream(self, path: str, metadata: Any = None) -> pa.NativeFile:
        raise NotImplementedError("Iceberg never appends to a file")


class StorageFileIO(PyArrowFileIO):
    """pyiceberg's pyarrow file IO with ``s3://`` through :mod:`seqlake.base.storage`."""

    def _initialize_fs(self, scheme: str, netloc: str | None = None) -> pafs.FileSystem:
        if scheme in _S3_SCHEMES:
            return pafs.PyFileSystem(StorageFileSystem())
        return super()._initialize_fs(scheme, netloc)

