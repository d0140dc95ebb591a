"""The Batch child: one array index's shards read, QC'd, trimmed, aligned, counted and staged.

- :mod:`.worker_main` the entry point (``seqlake worker``): environment, retries' idempotence, fault hooks
- :mod:`.worker` one child's work over its shards; :mod:`.trim` cutadapt's trimming; :mod:`.align` mappy's
  alignment (and the index); :mod:`.alignqc` alignment QC (``samtools stats``' numbers); :mod:`.heap` C heap
  probes for memory tests

May import: :mod:`seqlake.base`, :mod:`seqlake.reads`, :mod:`seqlake.plan`, :mod:`seqlake.lake` (its contract:
tables, staging, the aggregates, Parquet) but never the reduce step (:mod:`seqlake.reduce`) or the commit
(:mod:`seqlake.commit`).
"""
