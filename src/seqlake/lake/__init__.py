"""The lake: tables, the staging contract between children and commit, Parquet, and the commit's data work.

- :mod:`.tables` every table's schema (the one home: Glue, docs and the report are generated from it)
- :mod:`.staging` what a child leaves for the commit (manifests, aggregates) and how the commit reads it
- :mod:`.qc`, :mod:`.coverage`, :mod:`.depth` the exact aggregates a child fills and the merge adds up; here,
  not in ``child/``, because the merge needs them and must not import the child
- :mod:`.parquet_io` Parquet parts, written and published; :mod:`.merge` the commit's merge of every child

May import: :mod:`seqlake.base`, :mod:`seqlake.reads`, :mod:`seqlake.plan`. Must not import the child (which
imports this), the report, the AWS steps or the local cloud.
"""
