"""The lake: tables, the contracts between the stages (staging, positions, slices), Parquet, Iceberg, and the
exact aggregates and counting every stage shares.

- :mod:`.tables` every table's schema (the one home: Glue, docs and the report are generated from it)
- :mod:`.staging` what a child leaves for the commit (manifests, aggregates) and how the commit reads it
- :mod:`.qc`, :mod:`.coverage`, :mod:`.depth` the exact aggregates a child fills and the merge adds up; here,
  not in ``child/``, because the merge needs them and must not import the child
- :mod:`.parquet_io` Parquet parts, written and published; :mod:`.slices` a child's sorted BAM records by window
- :mod:`.pileup`, :mod:`.alleles`, :mod:`.vcf`, :mod:`.genomes` the counting, calling and files' pieces the reduce
  step (:mod:`seqlake.reduce`) and the commit (:mod:`seqlake.commit`) run

May import: :mod:`seqlake.base`, :mod:`seqlake.reads`, :mod:`seqlake.plan`. Must not import the stages
(child, reduce, commit: they import this), the report, the AWS steps or the local cloud.
"""
