"""The run's vocabulary: samples, object references, run states and the steps of a run.

Dependency-free on purpose (the standard library only): the start Lambda runs on every upload and
must not import numpy, dnaio or pyarrow to name a sample, and every layer of the app (core, AWS
steps, local cloud) can import this module without pulling in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: not-found answers of S3's HeadObject / GetObject (HEAD has no body, so only the status code)
NOT_FOUND_CODES: frozenset[str] = frozenset({"404", "NoSuchKey", "NotFound"})


class RunState(StrEnum):
    """``status.json``'s ``state`` and the ``runs`` table's ``state`` column.

    RUNNING lives in ``status.json`` only (the ``runs`` row is written when the run ends). REJECTED
    is an input the start function refused before any execution ran.
    """

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"

    @property
    def final(self) -> bool:
        return self is not RunState.RUNNING


#: the states a ``runs`` row can have
FINAL_STATES: tuple[RunState, ...] = tuple(s for s in RunState if s.final)


class Step(StrEnum):
    """Where a run failed: the start function or a state of the state machine (its name in the ASL)."""

    START = "Start"
    PLAN = "Plan"
    INDEX_JOB = "IndexJob"
    PLAN_AFTER_INDEX = "PlanAfterIndex"
    PROCESS_SHARDS = "ProcessShards"
    PROCESS_ONE_SHARD = "ProcessOneShard"
    PLAN_REDUCE = "PlanReduce"
    REDUCE_REGIONS = "ReduceRegions"
    REDUCE_ONE_REGION = "ReduceOneRegion"
    COMMIT = "Commit"

    @property
    def is_batch(self) -> bool:
        return self in (Step.INDEX_JOB, Step.PROCESS_SHARDS, Step.PROCESS_ONE_SHARD, *REDUCE_STEPS)

    @property
    def is_reduce(self) -> bool:
        return self in REDUCE_STEPS


#: the Batch states of the reduce step (their children are regions, not shards)
REDUCE_STEPS = (Step.REDUCE_REGIONS, Step.REDUCE_ONE_REGION)


@dataclass(frozen=True)
class Sample:
    """A sample's input files (URIs: ``s3://...`` or local paths); ``r2`` is None for single-end.

    A sample sequenced on several lanes is several of these with one name (a samplesheet row each);
    ``metadata`` holds the row's other columns (:mod:`seqlake.base.metadata`)."""

    name: str
    r1: str
    r2: str | None = None
    metadata: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def uris(self) -> tuple[str, ...]:
        return (self.r1,) if self.r2 is None else (self.r1, self.r2)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"sample": self.name, "r1": self.r1, "r2": self.r2}
        if self.metadata:
            d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        return cls(d["sample"], d["r1"], d.get("r2"), {str(k): str(v) for k, v in d.get("metadata", {}).items()})


@dataclass(frozen=True)
class ObjectRef:
    """One stored object as a run saw it: where it is and which version (ETag, size, mtime)."""

    uri: str
    size: int = 0
    etag: str | None = None
    mtime: float | None = None

    @property
    def bucket(self) -> str:
        return self.uri.removeprefix("s3://").partition("/")[0] if self.uri.startswith("s3://") else ""

    @property
    def key(self) -> str:
        return self.uri.removeprefix("s3://").partition("/")[2] if self.uri.startswith("s3://") else self.uri

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]


def normalise_etag(etag: str) -> str:
    """ETags without quotes: S3's API quotes them, EventBridge events do not."""
    return etag.strip('"')
