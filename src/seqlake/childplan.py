"""What one Batch child reads of its run: its entry of the todo list and its part of the plan.

``plan.json`` holds every input and shard of the run (megabytes at 10,000 children); a child needs its
own shards and the inputs they read. Beside the plan, the plan's writer puts every child's part in one
object, ``children.jsonl`` (:meth:`seqlake.layout.RunLayout.child_plans`): line 0 is the byte offset
of each child's line (:mod:`seqlake.fixedwidth`, so child c finds offsets c and c + 1 with one ranged
read of 25 bytes), line c + 1 is child c's part. A child therefore reads its todo entry, two offsets
and its line: a few hundred bytes to a few kB, whatever the number of children, in three small ranged
GETs; the plan step writes one object more, whatever the number of children.

Both a whole :class:`~seqlake.plan.Plan` and a :class:`ChildPlan` are a :class:`PlanView`: what the
worker and the shard readers use of a plan.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from seqlake import fixedwidth, storage
from seqlake.layout import CHILD_DIGITS, RunLayout
from seqlake.params import Params
from seqlake.plan import InputFile, Plan, Shard, Span

#: the todo list's key and the width of its entries (a child number)
TODO_KEY = "children"
#: line 0 of ``children.jsonl``: the key and the width of its byte offsets (up to 1 TB of lines)
OFFSETS_KEY = "offsets"
OFFSET_DIGITS = 12

T_co = TypeVar("T_co", covariant=True)


class Indexed(Protocol[T_co]):
    """A tuple, or a mapping from numbers: ``x[i]``."""

    def __getitem__(self, index: int, /) -> T_co: ...


class PlanView(Protocol):
    """What a child uses of a plan (a whole :class:`Plan` or a :class:`ChildPlan`)."""

    @property
    def run_id(self) -> str: ...

    @property
    def params(self) -> Params: ...

    @property
    def reference(self) -> str | None: ...

    @property
    def layout(self) -> RunLayout: ...

    @property
    def array_size(self) -> int: ...

    @property
    def inputs(self) -> Indexed[InputFile]: ...

    @property
    def shards(self) -> Indexed[Shard]: ...

    def child_shards(self, child: int) -> range: ...


@dataclass(frozen=True)
class ChildPlan:
    """One child's part of a plan: its shards (by their numbers in the run) and the inputs they read."""

    run_id: str
    out_prefix: str
    child: int
    array_size: int
    first_shard: int
    shards: Mapping[int, Shard]
    inputs: Mapping[int, InputFile]
    params: Params = field(default_factory=Params)
    reference: str | None = None

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.out_prefix, self.run_id)

    def child_shards(self, child: int) -> range:
        if child != self.child:
            raise ValueError(f"this is child {self.child}'s part of the plan, not child {child}'s")
        return range(self.first_shard, self.first_shard + len(self.shards))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChildPlan:
        shards = {int(s["index"]): Shard(index=int(s["index"]), sample=s["sample"],
                                         spans=tuple(Span(**sp) for sp in s["spans"])) for s in d["shards"]}
        first = min(shards)
        if sorted(shards) != list(range(first, first + len(shards))):
            raise ValueError(f"child {d['child']}: its shards are not consecutive")
        return cls(run_id=d["run_id"], out_prefix=d["out_prefix"], child=int(d["child"]),
                   array_size=int(d["array_size"]), first_shard=first, shards=shards,
                   inputs={int(k): InputFile(**v) for k, v in d["inputs"].items()},
                   params=Params.from_dict(d.get("params", {})), reference=d.get("reference"))


def _fields(obj: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if v is not None}


def child_lines(plan: Plan) -> bytes:
    """``children.jsonl``: the offsets line, then one line per child (see the module docstring)."""
    common = {"run_id": plan.run_id, "out_prefix": plan.out_prefix, "reference": plan.reference,
              "params": plan.params.to_dict(), "array_size": plan.array_size}
    inputs = [_fields(i) for i in plan.inputs]
    lines = []
    for child in range(plan.array_size):
        shards = [plan.shards[i] for i in plan.child_shards(child)]
        used = sorted({sp.input for s in shards for sp in s.spans})
        body = {**common, "child": child, "inputs": {str(i): inputs[i] for i in used},
                "shards": [{"index": s.index, "sample": s.sample, "spans": [_fields(sp) for sp in s.spans]}
                           for s in shards]}
        lines.append(json.dumps(body, separators=(",", ":")).encode() + b"\n")
    head = len(fixedwidth.dumps(OFFSETS_KEY, [0] * (len(lines) + 1), OFFSET_DIGITS)) + 1
    offsets = [head]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return fixedwidth.dumps(OFFSETS_KEY, offsets, OFFSET_DIGITS) + b"\n" + b"".join(lines)


def write_child_plans(plan: Plan) -> str:
    """Write every child's part of ``plan`` (one object); its URI."""
    uri = plan.layout.child_plans
    storage.write_bytes(uri, child_lines(plan))
    return uri


def load_child_plan(plan_uri: str, child: int) -> ChildPlan:
    """Child ``child``'s part of the plan at ``plan_uri``: two ranged reads; ValueError when the plan has
    no such child."""
    uri = RunLayout.of_plan(plan_uri).child_plans
    try:
        start, stop = fixedwidth.read_entries(uri, OFFSETS_KEY, child, OFFSET_DIGITS, count=2)
    except IndexError as err:
        raise ValueError(f"child {child} is not in the plan {plan_uri}") from err
    part = ChildPlan.from_dict(json.loads(storage.read_range(uri, start, stop)))
    if part.child != child:
        raise ValueError(f"{uri}: line {child + 1} is child {part.child}'s")
    return part


def todo_bytes(children: list[int]) -> bytes:
    """The todo list of an execution: the children it runs; array index i runs entry i."""
    return fixedwidth.dumps(TODO_KEY, children, CHILD_DIGITS)


def todo_child(uri: str, array_index: int) -> int:
    """Entry ``array_index`` of the todo list at ``uri`` (one ranged read)."""
    return fixedwidth.read_entries(uri, TODO_KEY, array_index, CHILD_DIGITS)[0]
