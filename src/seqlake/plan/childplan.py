"""What one Batch child reads of its run: its entry of the todo list and its part of the plan.

``plan.json`` holds every input and shard of the run (megabytes at 10,000 children); a child needs its
own shards and the inputs they read, which the plan's writer puts beside the plan, in
``children.jsonl`` (:mod:`seqlake.plan.planslices`). A child reads its todo entry, the two offsets of its
line and its line: a few kB whatever the number of children, in three small ranged GETs.

Both a whole :class:`~seqlake.plan.planfile.Plan` and a :class:`ChildPlan` are a :class:`PlanView`: what the
worker and the shard readers use of a plan.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from seqlake.base import storage
from seqlake.base.layout import CHILD_DIGITS, RunLayout
from seqlake.base.params import Params
from seqlake.plan import fixedwidth, planslices
from seqlake.plan.planfile import InputFile, Shard, Span
from seqlake.plan.reference import ReferencePin

#: the todo list's key and the width of its entries (a child number)
TODO_KEY = "children"

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
    def reference(self) -> ReferencePin | None: ...

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
    reference: ReferencePin | None = None

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
                   params=Params.from_dict(d.get("params", {})),
                   reference=ReferencePin.from_dict(d["reference"]) if d.get("reference") else None)


def load_child_plan(plan_uri: str, child: int) -> ChildPlan:
    """Child ``child``'s part of the plan at ``plan_uri``: two ranged reads; ValueError when the plan has
    no such child."""
    layout = RunLayout.of_plan(plan_uri)
    uri = layout.child_plans
    try:
        start, stop = fixedwidth.read_entries(uri, planslices.OFFSETS_KEY, child, planslices.OFFSET_DIGITS, count=2)
    except IndexError as err:
        raise ValueError(f"child {child} is not in the plan {plan_uri}") from err
    part = ChildPlan.from_dict(json.loads(storage.read_range(uri, start, stop)))
    if (part.run_id, part.child) != (layout.run_id, child):
        raise ValueError(f"{uri}: line {child + 1} is child {part.child} of run {part.run_id}")
    return part


def todo_bytes(children: list[int]) -> bytes:
    """The todo list of an execution: the children it runs; array index i runs entry i."""
    return fixedwidth.dumps(TODO_KEY, children, CHILD_DIGITS)


def todo_child(uri: str, array_index: int) -> int:
    """Entry ``array_index`` of the todo list at ``uri`` (one ranged read)."""
    return fixedwidth.read_entries(uri, TODO_KEY, array_index, CHILD_DIGITS)[0]
