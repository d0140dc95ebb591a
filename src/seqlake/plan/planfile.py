"""``plan.json``: the run's plan as the planner writes it and every reader loads it.

The planner (:mod:`seqlake.plan.planner`) reads the inputs to choose the shards; the Batch children
(:mod:`seqlake.child.worker`) and the commit (:mod:`seqlake.commit.merge`) only load the plan. They share this
module, which reads no FASTQ: the commit Lambda loads plans without the FASTQ readers (dnaio, isal,
rapidgzip) in its layers. The file's JSON Schema is ``schemas/plan.schema.json``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from seqlake import schemas
from seqlake.base import storage
from seqlake.base.layout import RunLayout
from seqlake.base.params import Params
from seqlake.plan import planslices
from seqlake.plan.reference import ReferencePin

#: 3: ``reference`` is the pinned reference (an object: :class:`ReferencePin`), not its URI
PLAN_VERSION = 3


@dataclass(frozen=True)
class InputFile:
    uri: str
    sample: str
    mate: int
    size: int
    compression: str
    etag: str | None = None
    mtime: float | None = None
    #: total records when known (counted or indexed); None for uncounted plain / bz2 / xz files
    records: int | None = None
    #: decompressed size when known
    plain_size: int | None = None
    #: GZTOOL seek index (gzip / BGZF)
    index_uri: str | None = None
    #: the checkpoint table, beside the index (for inspection; the plan's spans are self-contained)
    checkpoints_uri: str | None = None
    #: bytes of the seek index's header and first point (every span's index part starts with them)
    index_head: int | None = None
    #: the samplesheet row's other columns (lane, run_name, control, ...)
    metadata: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Span:
    """What one shard reads of one input file."""

    input: int
    mate: int
    #: plain offset of a record start where reading begins (a checkpoint or a snapped boundary); for a
    #: BGZF input without a seek index, the compressed offset of a block (and so is ``end_offset``)
    offset: int
    #: records to skip after ``offset``
    skip: int = 0
    #: 0-based number of the first record in the file; None for byte-range spans (not counted)
    first_record: int | None = None
    #: records in the span; None = up to ``end_offset`` (byte range) or to the end of the stream
    records: int | None = None
    #: exclusive plain end offset of a byte-range span
    end_offset: int | None = None
    #: the bytes of the input's seek index holding the span's seek points (seqlake.reads.seekindex)
    index_start: int | None = None
    index_stop: int | None = None


@dataclass(frozen=True)
class Shard:
    index: int
    sample: str
    spans: tuple[Span, ...]

    @property
    def records(self) -> int | None:
        return self.spans[0].records


@dataclass(frozen=True)
class Plan:
    run_id: str
    out_prefix: str
    inputs: tuple[InputFile, ...]
    shards: tuple[Shard, ...]
    params: Params = field(default_factory=Params)
    #: what identifies the reference's content and where its index is; None: no alignment
    reference: ReferencePin | None = None
    #: child i processes shards ``children[i]`` up to the next child's first (see :func:`pack_children`)
    children: tuple[int, ...] = ()
    version: int = PLAN_VERSION

    def __post_init__(self) -> None:
        if not self.children:  # one child per shard
            object.__setattr__(self, "children", tuple(range(len(self.shards))))

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.out_prefix, self.run_id)

    @property
    def plan_uri(self) -> str:
        return self.layout.plan

    @property
    def array_size(self) -> int:
        """Children: the Batch array's size."""
        return len(self.children)

    def child_shards(self, child: int) -> range:
        stop = self.children[child + 1] if child + 1 < len(self.children) else len(self.shards)
        return range(self.children[child], stop)

    @property
    def samples(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i.sample for i in self.inputs))

    def sample_inputs(self, sample: str) -> tuple[InputFile, ...]:
        return tuple(sorted((i for i in self.inputs if i.sample == sample), key=lambda i: i.mate))

    def paired(self, sample: str) -> bool:
        return any(i.mate == 2 for i in self.sample_inputs(sample))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "run_id": self.run_id,
            "out_prefix": self.out_prefix,
            "reference": self.reference.to_dict() if self.reference else None,
            "params": self.params.to_dict(),
            "inputs": [_drop_none(vars(i)) for i in self.inputs],
            "shards": [
                {"index": s.index, "sample": s.sample, "spans": [_drop_none(vars(sp)) for sp in s.spans]}
                for s in self.shards
            ],
            "children": list(self.children),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(
            version=int(d["version"]),
            run_id=d["run_id"],
            out_prefix=d["out_prefix"],
            reference=ReferencePin.from_dict(d["reference"]) if d.get("reference") else None,
            params=Params.from_dict(d.get("params", {})),
            inputs=tuple(InputFile(**i) for i in d["inputs"]),
            shards=tuple(
                Shard(index=s["index"], sample=s["sample"], spans=tuple(Span(**sp) for sp in s["spans"]))
                for s in d["shards"]
            ),
            children=tuple(d["children"]),
        )


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@cache
def _compiled_validator() -> Callable[[dict[str, Any]], Any] | None:
    """fastjsonschema compiles the schema to Python, an order of magnitude faster than jsonschema on a
    10,000-shard plan, and every Batch child loads the plan. None when it is not installed."""
    try:
        import fastjsonschema
    except ImportError:
        return None
    validator: Callable[[dict[str, Any]], Any] = fastjsonschema.compile(schemas.load("plan"))
    return validator


def validate_plan_dict(d: dict[str, Any], where: str = "plan.json") -> None:
    """Validate against ``schemas/plan.schema.json`` (draft-07) and check the shard numbering."""
    fast = _compiled_validator()
    if fast is not None:
        import fastjsonschema

        try:
            fast(d)
        except fastjsonschema.JsonSchemaValueException as err:
            raise ValueError(f"{where}: invalid plan: {err.message}") from err
    else:
        import jsonschema

        try:
            jsonschema.validate(d, schemas.load("plan"))
        except jsonschema.ValidationError as err:
            path = "/".join(str(p) for p in err.absolute_path)
            raise ValueError(f"{where}: invalid plan at /{path}: {err.message}") from err
    n = len(d["shards"])
    if [s["index"] for s in d["shards"]] != list(range(n)):
        raise ValueError(f"{where}: shard indexes are not 0..{n - 1}")
    children = d["children"]
    if children[0] != 0 or any(b <= a for a, b in itertools.pairwise(children)) or children[-1] >= n:
        raise ValueError(f"{where}: children must start at shard 0 and increase within 0..{n - 1}")
    n_inputs = len(d["inputs"])
    if any(sp["input"] >= n_inputs for s in d["shards"] for sp in s["spans"]):
        raise ValueError(f"{where}: a shard names an input that is not in the plan")


def load_plan(uri: str) -> Plan:
    """Read and validate a plan (JSON Schema and shard numbering)."""
    d = json.loads(storage.read_bytes(uri))
    validate_plan_dict(d, uri)
    return Plan.from_dict(d)


def write_plan(plan: Plan) -> str:
    """Write ``plan.json`` and every child's part of it (:mod:`seqlake.plan.planslices`), parts first."""
    d = plan.to_dict()
    validate_plan_dict(d, plan.plan_uri)
    storage.write_bytes(plan.layout.child_plans, planslices.child_lines(d))
    storage.write_bytes(plan.plan_uri, json.dumps(d, separators=(",", ":")).encode())
    return plan.plan_uri
