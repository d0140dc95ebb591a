"""The Iceberg commit's cost in the number of files a run adds (issue 36): N small Parquet parts (one per
child, as a run's alignments) added to one table through pyiceberg's Glue catalog, moto in-process (Glue,
S3), with the footers read in parallel. Prints seconds (wall and CPU) and the process's peak RSS growth.

    python bench/iceberg_commit.py 1000
"""

from __future__ import annotations

import io
import os
import resource
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    from moto import mock_aws

    from localcloud import patches
    from seqlake.base import clients, storage
    from seqlake.lake import iceberg
    from seqlake.lake.iceberg_io import FILE_IO
    from seqlake.lake.tables import BY_NAME

    patches.apply_all()
    clients.reset()
    with mock_aws():
        import boto3
        from pyiceberg.catalog.glue import GlueCatalog

        glue = boto3.client("glue", region_name="us-east-1")
        glue.create_database(DatabaseInput={"Name": "seqlake"})
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="lake")
        catalog = GlueCatalog("glue", client=glue, **{"py-io-impl": FILE_IO})
        table = BY_NAME["qc_summary"]
        iceberg.ensure_table(catalog, "seqlake", table, "s3://lake/results/qc_summary")
        schema = table.schema
        rows = {f.name: pa.array([0 if not pa.types.is_string(f.type) else "x"] * 4, f.type) for f in schema}
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pydict(rows, schema=schema), sink)
        paths = [f"s3://lake/results/qc_summary/run_id=r1/child={i:05d}.parquet" for i in range(n)]
        for p in paths:
            storage.write_bytes(p, sink.getvalue())
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0, cpu0 = time.perf_counter(), time.process_time()
        iceberg.commit_run(catalog, "seqlake", "r1", {"qc_summary": paths})
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        files = len(iceberg.catalog_files(catalog, "seqlake", "qc_summary"))
    # cpu: this process's CPU seconds during the commit (moto's answers included: it runs in this process), a
    # measure that a loaded machine stretches less than the wall clock
    print(f"files={n} committed={files} seconds={seconds:.2f} cpu_seconds={cpu:.2f} peak_rss_mib={rss1 / 1024:.0f} "
          f"growth_mib={(rss1 - rss0) / 1024:.0f}")


if __name__ == "__main__":
    main()
