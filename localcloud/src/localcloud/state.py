"""The local cloud's state folder: what survives the process.

Layout (the folder the command is given, else the one the app's home setting names, else the app's default:
:class:`.contract.Settings`)::

    s3/<bucket>/<key>     object bodies (mirrored after each execution, not on every put: children
                          write parts at full speed into moto's memory)
    objects.json          bucket -> key -> {etag, size, body}; ``body`` false for metadata-only entries
    catalog.json          the Glue tables and their registered partitions
    runs.json             run history: execution, state, timings, counts
    logs/                 one file per Lambda invocation and per Batch child attempt

Bodies of the app's metadata-only prefixes (seqlake's ``incoming/``: the user's FASTQ, often large and already
on the user's disk) are not kept, only their metadata. A query (the app's: ``seqlake local query``, say) reads
``catalog.json`` and ``s3/`` without starting moto.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud import athena, contract
from localcloud.athena import Result, TableDef
from localcloud.errors import NoCloudError

#: what is not mirrored, or not restored, is the app's (:attr:`.contract.App.metadata_only_prefixes`,
#: :attr:`.contract.App.not_restored_prefixes`: for seqlake, ``incoming/`` and ``results/``); an Iceberg table's
#: own metadata under a prefix not restored (``<table>/metadata/``: metadata files, manifest lists, manifests) is
#: restored: the next commit reads and extends it in the bucket
ICEBERG_METADATA_FOLDER = "/metadata/"


def restored(key: str) -> bool:
    """Whether a mirrored object goes back into moto on start."""
    return not key.startswith(contract.app().not_restored_prefixes) or ICEBERG_METADATA_FOLDER in key


def md5_file(path: Path) -> str:
    """The ETag S3 gives a single-part upload of the file."""
    h = hashlib.md5()  # noqa: S324 - the S3 ETag algorithm, not a security use
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_home() -> Path:
    """The state folder when the command names none: the app's home setting's, else its default."""
    settings = contract.app().settings
    return Path(os.environ.get(settings.home) or settings.default_home)


@dataclass(frozen=True)
class ObjectMeta:
    etag: str
    size: int
    body: bool


def keeps_body(key: str) -> bool:
    return not key.startswith(contract.app().metadata_only_prefixes)


class StateDir:
    def __init__(self, home: str | Path | None = None) -> None:
        self.root = Path(home) if home is not None else default_home()

    @property
    def objects_dir(self) -> Path:
        return self.root / "s3"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    def exists(self) -> bool:
        return (self.root / "catalog.json").is_file()

    def require(self) -> None:
        """Bad input (the state folder the user named or defaulted to) when no local cloud ever ran here."""
        if not self.exists():
            raise NoCloudError(str(self.root), "no local cloud here: start one here first, or name the folder of "
                               f"one (${contract.app().settings.home})")

    def ensure(self) -> None:
        self.objects_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------- JSON documents
    def _read(self, name: str, default: Any) -> Any:
        path = self.root / name
        return json.loads(path.read_text()) if path.is_file() else default

    def _write(self, name: str, doc: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp"
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        tmp.replace(self.root / name)  # atomic: a reader never sees half a file

    # -------------------------------------------------------------- objects
    def bucket_dir(self, bucket: str) -> Path:
        """The folder that mirrors ``bucket`` (its keys are paths below it)."""
        return self.objects_dir / bucket

    def local_path(self, bucket: str, key: str) -> Path:
        path = (self.objects_dir / bucket / key).resolve()
        if not path.is_relative_to(self.objects_dir.resolve()):
            raise ValueError(f"object key escapes the state folder: s3://{bucket}/{key}")
        return path

    def objects(self) -> dict[str, dict[str, ObjectMeta]]:
        raw = self._read("objects.json", {})
        return {b: {k: ObjectMeta(**m) for k, m in keys.items()} for b, keys in raw.items()}

    def save_objects(self, objects: dict[str, dict[str, ObjectMeta]]) -> None:
        self._write("objects.json", {b: {k: vars(m) for k, m in keys.items()} for b, keys in objects.items()})

    def files_under(self, location: str) -> list[Path]:
        """Parquet files stored locally under an ``s3://bucket/prefix/`` location."""
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        root = self.objects_dir / bucket / prefix
        if not root.is_dir():
            return []
        return sorted(p for p in root.rglob("*.parquet") if p.is_file())

    # -------------------------------------------------------------- queries
    def query(self, sql: str, database: str | None = None, *, as_of_run: str | None = None) -> Result:
        """One Athena query over this folder's committed tables: the Hive partitions' files and the Iceberg
        tables' snapshots both read from the folder's copy of the bucket (every caller reads it the same way:
        a query given the catalog but not the copy could not read an Iceberg table); ``database``: the one
        unqualified names resolve to (``None``: the app's, :attr:`.contract.App.database`)."""
        return athena.query(self.catalog(), self.files_under, sql, database, objects_root=self.objects_dir,
                            as_of_run=as_of_run)

    # -------------------------------------------------------------- catalog
    def catalog(self) -> list[TableDef]:
        return [TableDef.from_dict(d) for d in self._read("catalog.json", [])]

    def save_catalog(self, tables: list[TableDef]) -> None:
        self._write("catalog.json", [t.to_dict() for t in tables])

    # -------------------------------------------------------------- runs
    def sources(self) -> dict[str, str]:
        """``s3://bucket/key`` -> the local file it was uploaded from (bodies under ``incoming/`` are not
        mirrored: a re-run of a failed run puts its inputs back from these files)."""
        sources: dict[str, str] = self._read("sources.json", {})
        return sources

    def record_source(self, uri: str, path: Path) -> None:
        sources = self.sources()
        if sources.get(uri) != str(path):
            sources[uri] = str(path)
            self._write("sources.json", sources)

    def forget_sources(self, uris: set[str]) -> None:
        """Drop the uploads of ``uris`` (objects deleted since) from the sources."""
        sources = self.sources()
        if uris & sources.keys():
            self._write("sources.json", {u: p for u, p in sources.items() if u not in uris})

    def runs(self) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = self._read("runs.json", [])
        return runs

    def rewrite_runs(self, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Each run's record as ``rewrite`` returns it (a deleted sample's name taken out)."""
        runs = self.runs()
        if runs:
            self._write("runs.json", [rewrite(r) for r in runs])

    def record_run(self, run: dict[str, Any]) -> None:
        """Insert or replace the run with the same execution ARN."""
        runs = [r for r in self.runs() if r.get("execution_arn") != run.get("execution_arn")]
        runs.append(run)
        runs.sort(key=lambda r: str(r.get("started", "")))
        self._write("runs.json", runs)
