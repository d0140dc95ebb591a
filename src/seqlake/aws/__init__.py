"""The AWS steps of the pipeline: the logic behind the thin Lambda handlers in ``functions/``.

- :mod:`seqlake.aws.observability` the shared Powertools Logger, Tracer and Metrics
- :mod:`seqlake.aws.events` EventBridge S3 events, the objects of a run, run ids (file names:
  :mod:`seqlake.base.naming`)
- :mod:`seqlake.aws.start` ``start_run`` and ``settle``: uploads -> a quiet folder -> its runs -> executions
- :mod:`seqlake.aws.plan_step` ``plan_step`` (the state machine's first task)
- :mod:`seqlake.aws.steps` ``commit_step``, ``record_failure`` (the state machine's tasks after the children)
- :mod:`seqlake.aws.status` ``runs/<run_id>/status.json`` (no pyarrow: the plan step writes it too)
- :mod:`seqlake.aws.runs_row` the run's row in the ``runs`` table (Parquet)
- :mod:`seqlake.aws.catalog` Glue partition registration (``BatchCreatePartition``, last)
- :mod:`seqlake.aws.index_job` the Batch job that plans what the plan Lambda cannot: inputs too large to index
  inside Lambda, a reference whose minimap2 index is not stored yet
- :mod:`seqlake.aws.render_template` writes the Glue table resources of ``template.yaml`` from
  :mod:`seqlake.lake.tables`

Each Lambda carries only the layers its handler's imports need (template.yaml, docs/DEPLOY.md): a
module's imports decide which functions may use it (tests/aws/test_layers.py).

Nothing here creates a boto3 client at import time: the clients are made on first use, so the
handlers import fast and tests can point them at moto.
"""
