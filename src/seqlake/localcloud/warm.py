"""What the local cloud's fork server prepares once for all its children (:class:`.launcher.Launcher`).

The modules below are imported by the server before its first child; none of them reads the environment
or makes a client at import time (Powertools' ``Logger``, ``Tracer`` and ``Metrics`` objects, made by
``seqlake.aws.observability``, read the function's environment: the handler's own module, imported in the
child after its environment is set, makes them). :func:`prepare` shares one botocore loader and parses
the models of the services the handlers and the worker call, so each child inherits them parsed.
"""

from __future__ import annotations

#: imported once by the server
PRELOAD: tuple[str, ...] = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "jsonschema",
    "fastjsonschema",
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.compute",
    "dnaio",
    "isal.igzip",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.tracing.tracer",
    "aws_lambda_powertools.utilities.validation",
    "aws_lambda_powertools.utilities.typing",
    "aws_lambda_powertools.utilities.data_classes",
    "seqlake.plan.planner",
    "seqlake.plan.planfile",
    "seqlake.plan.childplan",
    "seqlake.reads.seekindex",
    "seqlake.reads.bgzf",
    "seqlake.base.storage",
    "seqlake.plan.samplesheet",
    "seqlake.lake.tables",
    "seqlake.lake.parquet_io",
    "seqlake.lake.merge",
    "seqlake.reads.gzindex",
    # the worker (Batch children): its entry point and what a shard needs
    "seqlake.cli",
    "seqlake.child.worker_main",
    "seqlake.child.worker",
    "seqlake.child.align",
    "seqlake.child.trim",
    "seqlake.lake.qc",
    "seqlake.lake.coverage",
    "seqlake.plan.shards",
    "mappy",
    "cutadapt.adapters",
    "cutadapt.qualtrim",
    # the Iceberg commit (CommitFunction, RecordFailure's rollback, the maintenance commands): 1.8 s of imports
    # a commit paid each time. pyiceberg reads its configuration (``PYICEBERG_*``, ``~/.pyiceberg.yaml``) at
    # import; seqlake gives its catalog every property it uses, so the server's copy is the children's
    "pyiceberg.catalog.glue",
    "pyiceberg.table",
    "pyiceberg.io.pyarrow",
    "pyiceberg.manifest",
    "seqlake.lake.iceberg",
    "seqlake.lake.iceberg_io",
    # the Lambda children's side
    "seqlake.localcloud.lambda_runtime",
)

#: the services the handlers make clients for: their models are parsed once, in the server
WARM_SERVICES: tuple[str, ...] = ("s3", "stepfunctions", "glue", "batch", "logs", "sts", "sqs")

#: what the server calls before preloading (``"module:function"``)
INIT = f"{__name__}:prepare"


def prepare() -> None:
    """One botocore loader for the server and its children, with the handlers' models parsed."""
    from seqlake.localcloud import botocore_loader

    botocore_loader.share()
    botocore_loader.warm(WARM_SERVICES)
