"""``seqlake local delete-sample`` and ``seqlake local compact``: the lake's maintenance, run on the state folder
with no local cloud running.

The tables are committed to through :class:`.state_catalog.StateCatalog` (the state folder's ``catalog.json``
and copy of the bucket), with the code the stack's functions run on AWS (:mod:`seqlake.lake.deletion` in
``DeleteSampleFunction``, :mod:`seqlake.lake.compaction` in ``CompactFunction``: docs/DEPLOY.md); what was
written or removed is then recorded in ``objects.json`` so that the next local cloud puts it back as it is.
Run it while no ``seqlake local run`` uses the same state folder (that run's cloud would save its own catalog
over this one's when it ends).
"""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path

from rich.console import Console

from localcloud.state import StateDir, default_home
from seqlake.base.errors import EXIT_OK, BadInputError, UsageError
from seqlake.base.layout import COMPACTIONS, DELETIONS, REPORTS, RESULTS, RUNS
from seqlake.local.adapter import APP, app_errors

#: the bucket's folders a maintenance command writes or removes objects in (``incoming/`` bodies are not kept
#: in the state folder: their keys are forgotten by name)
CHANGED_PREFIXES: tuple[str, ...] = tuple(f"{p}/" for p in (RESULTS, RUNS, REPORTS, DELETIONS, COMPACTIONS))


def _state(args: argparse.Namespace) -> StateDir:
    state = StateDir(args.home or default_home())
    state.require()
    return state


@app_errors
def delete_sample_command(args: argparse.Namespace) -> int:
    from localcloud.state_catalog import StateCatalog, bucket_of
    from seqlake.lake.deletion import SampleNotFoundError, delete_sample
    from seqlake.lake.redaction import redacted

    if not args.yes:
        raise UsageError(f"this removes every row, file and object of sample {args.sample!r} for good (its older "
                         "snapshots too): add --yes")
    state = _state(args)
    catalog = StateCatalog(state)
    bucket = bucket_of(state)
    if bucket is None:
        raise BadInputError(args.sample, "no table holds a sample of that name: this local cloud has no tables yet")
    bucket_root = f"s3://{bucket}"
    local_root = str(state.bucket_dir(bucket))
    try:
        record = delete_sample(catalog, APP.database, args.sample, local_root, bucket_root=bucket_root,
                               requested_by=getpass.getuser())
    except SampleNotFoundError as err:
        raise BadInputError(args.sample, str(err)) from None
    # the uploads' bodies are not in the state folder: their keys (and the local files they came from) forgotten;
    # a samplesheet's copy the state folder kept for re-runs (``uploads/``) goes with it
    for uri in record.sheets:
        kept = state.sources().get(uri)
        if kept is not None and Path(kept).is_relative_to(state.root):
            Path(kept).unlink(missing_ok=True)
    catalog.forget_objects(bucket, [u.removeprefix(bucket_root + "/") for u in [*record.uploads, *record.sheets]])
    catalog.sync_objects(bucket, CHANGED_PREFIXES)
    catalog.refresh_objects(bucket, [Path(u).relative_to(local_root).as_posix() for u in record.records_redacted
                                     if u.startswith(local_root + "/")])
    uploads = frozenset(record.uploads)
    state.rewrite_runs(lambda run: redacted(run, args.sample, uploads))
    console = Console(stderr=True)
    console.print(f"sample {args.sample!r} deleted: {sum(record.rows.values())} rows from "
                  f"{sum(1 for n in record.rows.values() if n)} tables of {len(record.runs)} run(s), "
                  f"{len(record.files_removed)} data files and {len(record.objects_removed)} other objects "
                  f"removed, {sum(len(s) for s in record.expired_snapshots.values())} snapshots expired; the audit "
                  f"record: {record.audit}")
    return EXIT_OK


@app_errors
def compact_command(args: argparse.Namespace) -> int:
    """Compaction and retention of the local tables (the code ``CompactFunction`` runs on its schedule on AWS,
    docs/DEPLOY.md; off locally: this command instead)."""
    from localcloud.state_catalog import StateCatalog, bucket_of
    from seqlake.lake.compaction import KEEP_DAYS, compact

    state = _state(args)
    catalog = StateCatalog(state)
    bucket = bucket_of(state)
    if bucket is None:
        Console(stderr=True).print("no tables yet: nothing to compact")
        return EXIT_OK
    keep_days = KEEP_DAYS if args.keep_days is None else args.keep_days
    record = compact(catalog, APP.database, str(state.bucket_dir(bucket)), keep_days=keep_days)
    catalog.sync_objects(bucket, CHANGED_PREFIXES)
    runs = sum(len(r) for r in record.compacted.values())
    Console(stderr=True).print(
        f"{runs} run partition(s) rewritten into one file each ({record.files_replaced} small files replaced), "
        f"{sum(record.expired_snapshots.values())} snapshot(s) older than {keep_days:g} days expired, "
        f"{record.files_removed} file(s) removed")
    return EXIT_OK
