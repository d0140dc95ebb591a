"""The lake's maintenance on AWS (issue 36): delete a sample everywhere, compact the tables. Each is a Lambda
function of its own running the library code the local commands run (:mod:`seqlake.lake.deletion`,
:mod:`seqlake.lake.compaction`) on the stack's bucket and pyiceberg's Glue catalog.

- :func:`delete_sample_step`: the lab invokes the function with ``{"sample": NAME, "confirm": NAME}``. The
  confirmation is the name typed twice (the local command's ``--yes``): a deletion cannot be undone, and an
  invocation is easy to send by mistake (a copied payload, a retried script). A name no table holds is refused
  as locally, naming the samples it may have meant.
- :func:`compact_step`: the schedule's (or an operator's) invocation; it starts no partition after its
  deadline (the function's remaining time less :data:`COMPACTION_MARGIN_S`) and the next invocation goes on.

Who asked: Lambda passes a function no IAM identity of its caller (its context has none for a direct
invocation), so the record says what the event declares (``requested_by``; the documented command fills it in
from ``aws sts get-caller-identity``) and the invocation's request id, which CloudTrail's Lambda data events
tie to the verified caller where the account records them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from seqlake.aws import catalog as aws_catalog
from seqlake.lake import compaction, deletion

#: no partition is started when less than this is left of the function's time: the largest partition the
#: compaction rewrites (:data:`seqlake.lake.compaction.MAX_BYTES`, 256 MiB of Parquet) read, written and
#: committed, and each table's expiry after it, must fit in it
COMPACTION_MARGIN_S = 180.0
#: the audit record's ``requested_by`` when the event names nobody
UNDECLARED = "not declared by the caller"


class DeleteRequestError(ValueError):
    """The event is not a deletion the caller confirmed (the message says what to send)."""


@dataclass(frozen=True)
class DeleteRequest:
    sample: str
    #: who asked, as the event declares it (None: it does not say)
    requested_by: str | None

    @classmethod
    def from_event(cls, event: Any) -> DeleteRequest:
        """``{"sample": NAME, "confirm": NAME, "requested_by": WHO}``; refused unless ``confirm`` is ``sample``."""
        if not isinstance(event, dict) or not isinstance(event.get("sample"), str) or not event["sample"].strip():
            raise DeleteRequestError('send {"sample": "NAME", "confirm": "NAME"}: the name of the sample to delete, '
                                     "twice")
        sample = event["sample"]
        if event.get("confirm") != sample:
            example = json.dumps({"sample": sample, "confirm": sample})
            raise DeleteRequestError(f"this removes every row, file and object of sample {sample!r} for good (its "
                                     f'older snapshots too): repeat its name as "confirm" to go ahead: {example}')
        who = event.get("requested_by")
        return cls(sample, who.strip() if isinstance(who, str) and who.strip() else None)

    def who(self, request_id: str) -> str:
        """The audit record's ``requested_by``: the declared caller and the invocation (CloudTrail's Lambda data
        events tie its request id to the verified caller)."""
        if self.requested_by is None:
            return f"{UNDECLARED} (Lambda request {request_id})"
        return f"{self.requested_by} (as the invocation declared it; Lambda request {request_id})"


def delete_sample_step(request: DeleteRequest, *, database: str, bucket: str, request_id: str) -> dict[str, Any]:
    """Delete the sample from the stack's lake (:func:`seqlake.lake.deletion.delete_sample`); a summary of the
    audit record (written under ``deletions/``). :class:`seqlake.lake.deletion.SampleNotFoundError` when no
    table holds the name."""
    root = f"s3://{bucket}"
    record = deletion.delete_sample(
        aws_catalog.iceberg_catalog(), database, request.sample, root, bucket_root=root,
        requested_by=request.who(request_id))
    # a few numbers and the record's key: the response must not grow with the lake
    return {"sample": record.sample, "runs": record.runs, "rows": sum(record.rows.values()),
            "files_removed": len(record.files_removed), "objects_removed": len(record.objects_removed),
            "expired_snapshots": sum(len(s) for s in record.expired_snapshots.values()), "audit": record.audit}


def compact_step(*, database: str, bucket: str, keep_days: float, remaining_ms: int,
                 margin_s: float = COMPACTION_MARGIN_S) -> dict[str, Any]:
    """Compact every table and expire the snapshots older than ``keep_days``
    (:func:`seqlake.lake.compaction.compact`), starting no partition once less than ``margin_s`` is left of
    ``remaining_ms``; a summary of its record (written under ``compactions/``)."""
    deadline = time.monotonic() + remaining_ms / 1000 - margin_s
    record = compaction.compact(aws_catalog.iceberg_catalog(), database, f"s3://{bucket}", keep_days=keep_days,
                                deadline=deadline)
    return {"compacted": sum(len(r) for r in record.compacted.values()), "files_replaced": record.files_replaced,
            "too_large": sum(len(r) for r in record.too_large.values()),
            "expired_snapshots": sum(record.expired_snapshots.values()), "files_removed": record.files_removed,
            "stopped_early": record.stopped_early, "finished_at": record.finished_at}
