"""The local cloud's Iceberg tables, changed with no local cloud running: a pyiceberg catalog over the state folder.

The local cloud keeps its Glue catalog in ``catalog.json`` (each Iceberg table's ``metadata_location``) and its
bucket in ``s3/<bucket>/`` (:mod:`.state`); on start it points each Glue table back at the saved metadata
(:func:`.mirror.restore`). So a maintenance command (the app's: ``seqlake local delete-sample``, say)
commits to the tables here, as pyiceberg's Glue catalog does there: the new metadata file written beside the
old (``s3://bucket/key`` is ``s3/bucket/key``: :class:`.iceberg.MirrorFileIO`), then the
table's ``metadata_location`` swapped in ``catalog.json`` if it is still the one the commit read (else
``CommitFailedException``, which the app's commit retries). The objects it writes or removes are
then recorded in ``objects.json`` (:meth:`StateCatalog.sync_objects`), so the next start puts them back.

Only what those commands need is here: loading and committing tables; the rest of pyiceberg's catalog API
(creating, listing, renaming tables, views, namespaces) is the template's and Glue's, and raises.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NoReturn

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table

from localcloud.athena import TableDef
from localcloud.iceberg import MIRROR_FILE_IO, MirrorFileIO
from localcloud.state import ObjectMeta, StateDir, keeps_body, md5_file

if TYPE_CHECKING:
    from pyiceberg.table.update import TableRequirement, TableUpdate


class StateCatalog(MetastoreCatalog):
    """pyiceberg's catalog of the Iceberg tables in a state folder's ``catalog.json``."""

    def __init__(self, state: StateDir) -> None:
        super().__init__("localcloud-state",
                         **{"py-io-impl": MIRROR_FILE_IO, MirrorFileIO.ROOT: str(state.objects_dir)})
        self.state = state

    def _table_def(self, identifier: str | tuple[str, ...]) -> TableDef:
        database, name = self.identifier_to_database_and_table(identifier, NoSuchTableError)
        for t in self.state.catalog():
            if (t.database, t.name) == (database, name) and t.metadata_location:
                return t
        raise NoSuchTableError(f"no Iceberg table {database}.{name} in {self.state.root / 'catalog.json'}")

    def load_table(self, identifier: str | tuple[str, ...]) -> Table:
        t = self._table_def(identifier)
        location = str(t.metadata_location)
        metadata = FromInputFile.table_metadata(self._load_file_io(location=location).new_input(location))
        return Table(identifier=(t.database, t.name), metadata=metadata, metadata_location=location,
                     io=self._load_file_io(metadata.properties, location), catalog=self)

    def commit_table(self, table: Table, requirements: tuple[TableRequirement, ...],
                     updates: tuple[TableUpdate, ...]) -> CommitTableResponse:
        current = self.load_table(table.name())
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        if staged.metadata == current.metadata:
            return _response(current.metadata, current.metadata_location)
        self._write_metadata(metadata=staged.metadata, io=staged.io, metadata_path=staged.metadata_location)
        # the swap: only from the metadata this commit read (one process writes catalog.json at a time here;
        # the check is Glue's VersionId check, kept so that a retried commit behaves as on AWS)
        tables = self.state.catalog()
        database, name = current.name()
        for i, t in enumerate(tables):
            if (t.database, t.name) == (database, name):
                if t.metadata_location != current.metadata_location:
                    raise CommitFailedException(f"{database}.{name} was committed meanwhile")
                tables[i] = dataclasses.replace(t, metadata_location=staged.metadata_location)
        self.state.save_catalog(tables)
        return _response(staged.metadata, staged.metadata_location)

    def sync_objects(self, bucket: str, prefixes: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """Record in ``objects.json`` the files now under ``prefixes`` of the bucket's folder that it lacks (what
        a commit wrote), and drop the entries of kept bodies whose file is gone (what one removed); returns the
        keys added and dropped."""
        root = self.state.bucket_dir(bucket)
        saved = self.state.objects()
        known = saved.setdefault(bucket, {})
        added: list[str] = []
        for prefix in prefixes:
            base = root / prefix
            for path in sorted(base.rglob("*")) if base.is_dir() else []:
                key = path.relative_to(root).as_posix()
                if path.is_file() and not path.name.endswith(".tmp") and key not in known:
                    known[key] = ObjectMeta(etag=md5_file(path), size=path.stat().st_size, body=keeps_body(key))
                    added.append(key)
        dropped = [k for k, m in known.items() if m.body and k.startswith(prefixes) and not (root / k).is_file()]
        for key in dropped:
            del known[key]
        self.state.save_objects(saved)
        return added, dropped

    def refresh_objects(self, bucket: str, keys: list[str]) -> None:
        """The metadata of ``keys``, rewritten in place (a deleted sample's name taken out of a run's records),
        made again from their files in the bucket's folder."""
        root = self.state.bucket_dir(bucket)
        saved = self.state.objects()
        known = saved.setdefault(bucket, {})
        for key in keys:
            path = root / key
            if key in known and path.is_file():
                known[key] = ObjectMeta(etag=md5_file(path), size=path.stat().st_size, body=known[key].body)
        self.state.save_objects(saved)

    def forget_objects(self, bucket: str, keys: list[str]) -> None:
        """Drop ``keys`` from ``objects.json`` and from the uploads' sources (a deleted upload's body was never
        mirrored: its metadata and the local file it came from are what the state folder holds of it)."""
        saved = self.state.objects()
        for key in keys:
            saved.get(bucket, {}).pop(key, None)
        self.state.save_objects(saved)
        self.state.forget_sources({f"s3://{bucket}/{k}" for k in keys})

    # the rest of the catalog API is the template's (Glue) and the local cloud's: not here
    def _unsupported(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError("the state folder's catalog only loads and commits the template's tables")

    create_table = create_namespace = drop_namespace = drop_table = drop_view = _unsupported
    list_namespaces = list_tables = list_views = load_namespace_properties = _unsupported
    load_view = register_table = register_view = rename_table = _unsupported
    update_namespace_properties = view_exists = _unsupported


def _response(metadata: Any, location: str) -> CommitTableResponse:
    return CommitTableResponse.model_validate({"metadata": metadata, "metadata-location": location})


def bucket_of(state: StateDir) -> str | None:
    """The data bucket of the state folder's Iceberg tables (the bucket of their locations); None before the
    first run deployed them."""
    buckets = {t.location.removeprefix("s3://").split("/", 1)[0] for t in state.catalog() if t.metadata_location}
    if len(buckets) > 1:
        raise ValueError(f"{state.root}: expected the Iceberg tables of one bucket, found {sorted(buckets)}")
    return buckets.pop() if buckets else None
