"""The EC2 instance types a Batch compute environment of the template may launch: vCPUs, memory, and the memory
Batch can give jobs on each.

The app's home of these facts: the plan's job sizes (:mod:`seqlake.plan.sizing`: a job must fit the largest
instance of ``InstanceTypes``) read ``instance_types.json`` beside this module; the local cloud's rule that a job
fitting no instance stays ``RUNNABLE`` reads the same numbers from its own source (``localcloud.instances``,
held equal by ``tests/local/test_component_contract.py``). That file is generated
(``python -m seqlake.local.instance_data``; ``--check`` in ``make lint``) from EC2's
``DescribeInstanceTypes`` as moto records it, for the families the template names (its ``RegionInstanceTypes``
defaults, the families docs/DEPLOY.md suggests, and Batch's ``optimal``); do not edit it by hand.

A family or type not in the file is unknown here: the plan then caps nothing, and the local cloud says nothing,
as before (add the family to the generator's list).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: the generated data file (package data: the Lambda layer copies src/seqlake whole)
DATA_PATH = Path(__file__).with_name("instance_types.json")


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    #: the installed memory (EC2's MemoryInfo.SizeInMiB)
    memory_mib: int
    #: what Batch can give jobs on it: the memory the OS reports less the ECS agent's reservation
    #: (:func:`job_memory_mib`; the file says how)
    job_memory_mib: int


def job_memory_mib(memory_mib: int, os_visible_share: float, reserved_mib: int) -> int:
    """The memory Batch registers for jobs on an instance of ``memory_mib`` installed: the ECS agent registers
    what the OS reports (less than installed: the kernel's and the platform's overhead, ``os_visible_share``)
    less what it reserves (``reserved_mib``). AWS Batch user guide, "Compute resource memory management"."""
    return int(memory_mib * os_visible_share) - reserved_mib


@functools.cache
def data() -> dict[str, object]:
    """The file as it is (its ``source`` and ``job_memory`` say where each number comes from)."""
    loaded: dict[str, object] = json.loads(DATA_PATH.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def instance_types() -> dict[str, InstanceType]:
    """Every instance type of the file by name."""
    types = data()["types"]
    assert isinstance(types, dict)
    return {name: InstanceType(name, int(v), int(m), int(j)) for name, (v, m, j) in types.items()}


def region_families(region: str) -> tuple[str, ...]:
    """The families the template's ``InstanceTypes`` default (empty) means in ``region`` (its
    ``RegionInstanceTypes`` mapping); () for a region it does not name."""
    regions = data().get("region_families")
    assert isinstance(regions, dict)
    return tuple(regions.get(region) or ())


def family_of(instance_type: str) -> str:
    return instance_type.partition(".")[0]


def expand(given: Iterable[str]) -> list[InstanceType]:
    """A compute environment's ``instanceTypes`` (families or types) as the instance types of the file; a name
    the file does not hold gives nothing."""
    known = instance_types()
    out: list[InstanceType] = []
    for name in given:
        if "." in name:
            out += [known[name]] if name in known else []
        else:
            out += [t for t in known.values() if family_of(t.name) == name]
    return out


def largest(given: Iterable[str]) -> InstanceType | None:
    """The largest instance type (vCPUs, then job memory) ``given`` allows; None when any of its names is not
    in the file (then nothing can be said about what fits)."""
    best: InstanceType | None = None
    for name in given:
        found = expand([name])
        if not found:
            return None
        top = max(found, key=lambda t: (t.vcpus, t.job_memory_mib))
        if best is None or (top.vcpus, top.job_memory_mib) > (best.vcpus, best.job_memory_mib):
            best = top
    return best
