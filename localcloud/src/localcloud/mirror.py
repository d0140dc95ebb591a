"""The state folder's mirror of moto: objects and Glue partitions put back on start, the data bucket and
the catalog saved after a wait (and before each Athena query, which reads the saved copy)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig

from localcloud import athena, patches
from localcloud.deployer import ACCOUNT, PARTITION
from localcloud.hooks import events_paused
from localcloud.state import ObjectMeta, StateDir, keeps_body, restored

#: service name -> a client of the local cloud
Clients = Callable[[str], Any]


def restore(state: StateDir, clients: Clients) -> None:
    """Put the saved objects and partitions back, without starting runs for them."""
    s3, glue = clients("s3"), clients("glue")
    existing = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    with events_paused():
        for bucket, keys in state.objects().items():
            if bucket not in existing:
                continue
            for key, meta in keys.items():
                path = state.local_path(bucket, key)
                if meta.body and restored(key) and path.is_file():
                    _put_back(s3, bucket, key, path, meta)
        tables = {
            (t["DatabaseName"], t["Name"])
            for db in glue.get_databases()["DatabaseList"]
            for t in glue.get_tables(DatabaseName=db["Name"])["TableList"]
        }
        for t in state.catalog():
            if (t.database, t.name) in tables and t.metadata_location:
                _restore_metadata_location(glue, t.database, t.name, t.metadata_location)
            if (t.database, t.name) not in tables or not t.partitions:
                continue
            parts = [{"Values": list(p.values), "StorageDescriptor": {"Location": p.location}} for p in t.partitions]
            for i in range(0, len(parts), 100):
                glue.batch_create_partition(
                    DatabaseName=t.database, TableName=t.name, PartitionInputList=parts[i : i + 100]
                )


def _restore_metadata_location(glue: Any, database: str, name: str, location: str) -> None:
    """An Iceberg table redeployed at start points at its new empty metadata: point it back at the saved one
    (its files were put back with the bucket), as Glue kept it."""
    table = glue.get_table(DatabaseName=database, Name=name)["Table"]
    keep = ("Name", "Description", "TableType", "Parameters", "StorageDescriptor", "PartitionKeys")
    table_input = {k: table[k] for k in keep if k in table}
    table_input["Parameters"] = {**table.get("Parameters", {}), "metadata_location": location}
    glue.update_table(DatabaseName=database, TableInput=table_input)


def _put_back(s3: Any, bucket: str, key: str, path: Path, meta: ObjectMeta) -> None:
    """One saved object into moto, streamed from its file: in parts when it was uploaded in parts (a ``-N``
    ETag: boto3's parts, whose size :data:`_PARTS` repeats, so the ETag comes back the same), else in one
    PUT. Never read whole here: a 4.75 GB reference index read whole, then sent in one PUT, grew this
    process by about 14 GB (the bytes, botocore's request and moto's copy of it)."""
    if "-" in meta.etag:
        s3.upload_file(str(path), bucket, key, Config=_PARTS)
        return
    with path.open("rb") as body:
        s3.put_object(Bucket=bucket, Key=key, Body=body)


#: boto3's default multipart threshold and part size (``upload_file`` without a config), which the objects
#: uploaded in parts (children's and the index job's ``storage.upload``) were cut by
_PARTS = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024)


def catalog(clients: Clients) -> list[athena.TableDef]:
    """The Glue catalog as it is now (tables and registered partitions)."""
    glue = clients("glue")
    out = []
    for db in glue.get_databases()["DatabaseList"]:
        for t in glue.get_paginator("get_tables").paginate(DatabaseName=db["Name"]).build_full_result()["TableList"]:
            sd = t.get("StorageDescriptor", {})
            parts = (
                glue.get_paginator("get_partitions")
                .paginate(DatabaseName=db["Name"], TableName=t["Name"])
                .build_full_result()["Partitions"]
            )
            out.append(
                athena.TableDef(
                    database=db["Name"],
                    name=t["Name"],
                    location=sd.get("Location", ""),
                    columns=tuple((c["Name"], c["Type"]) for c in sd.get("Columns", [])),
                    partition_keys=tuple((k["Name"], k["Type"]) for k in t.get("PartitionKeys", [])),
                    partitions=tuple(
                        athena.Partition(tuple(p["Values"]), p["StorageDescriptor"]["Location"])
                        for p in sorted(parts, key=lambda p: p["Values"])
                    ),
                    view=athena.view_query(t["ViewOriginalText"]) if t.get("TableType") == "VIRTUAL_VIEW" else None,
                    metadata_location=iceberg_metadata(t),
                )
            )
    return out


def iceberg_metadata(table: dict[str, Any]) -> str | None:
    """An Iceberg table's current metadata file (Glue's ``metadata_location``); None for any other table."""
    params = table.get("Parameters") or {}
    if str(params.get("table_type", "")).upper() != "ICEBERG":
        return None
    location = params.get("metadata_location")
    return str(location) if location else None


def bucket_objects(bucket: str) -> Iterator[tuple[str, ObjectMeta, Callable[[], Iterator[bytes]]]]:
    """The bucket's current objects, read from moto's backend in this process: key, metadata, and the
    body a MiB at a time (a large object is never whole in this process's memory).

    The mirror is the local cloud's own bookkeeping, not the app's traffic: through the API it would pay
    the simulated request latency and moto's HTTP handling once per object (a 10,000-child run leaves
    about 50,000 objects)."""
    from moto.s3.models import FakeDeleteMarker, s3_backends

    for key, obj in s3_backends[ACCOUNT][PARTITION].get_bucket(bucket).keys.items():
        if isinstance(obj, FakeDeleteMarker):  # the current version of a deleted key in a versioned bucket
            continue
        meta = ObjectMeta(etag=obj.etag.strip('"'), size=int(obj.size), body=keeps_body(key))
        yield key, meta, functools.partial(patches.key_chunks, obj)


def persist(state: StateDir, clients: Clients, bucket: str, seen: set[str] | None = None) -> int:
    """Mirror ``bucket``'s new or changed objects and the catalog into the state folder; returns the
    bodies written. ``seen``: the keys this cloud has had in the bucket (updated here); one of them gone from it
    since was deleted by the app (a sample's deletion, a rolled-back commit), and is dropped from the state
    folder, its file and its upload's source too. A key not seen is left as it is: a committed data file under
    ``results/`` and an upload's body are not put back into the bucket on start, so their absence says nothing."""
    saved = state.objects()
    known = saved.setdefault(bucket, {})
    written = 0
    now: set[str] = set()
    for key, meta, body in bucket_objects(bucket):
        now.add(key)
        path = state.local_path(bucket, key)
        if meta.body and (known.get(key) != meta or not path.is_file()):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            with tmp.open("wb") as f:
                for chunk in body():
                    f.write(chunk)
            tmp.replace(path)
            written += 1
        known[key] = meta
    if seen is not None:
        gone = sorted(k for k in seen - now if k in known)
        for key in gone:
            del known[key]
            state.local_path(bucket, key).unlink(missing_ok=True)
        state.forget_sources({f"s3://{bucket}/{k}" for k in gone})
        seen -= set(gone)
        seen |= now
    state.save_objects(saved)
    state.save_catalog(catalog(clients))
    return written
