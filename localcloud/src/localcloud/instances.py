"""The EC2 instance types Batch may launch, as the local cloud's scheduler knows them: vCPUs, installed memory, and
the memory Batch can give jobs on each.

The numbers are EC2's ``DescribeInstanceTypes`` (``VCpuInfo.DefaultVCpus``, ``MemoryInfo.SizeInMiB``) as moto
records them (``moto/ec2/resources/instance_types.json.gz``); the memory for jobs is AWS Batch's rule
(:func:`job_memory_mib`). The app keeps its own file of the types its template names
(``seqlake.base.instances``, generated from these by ``python -m seqlake.local.instance_data``);
``tests/local/test_component_contract.py`` holds the two to the same numbers.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import moto

#: AWS Batch user guide, "Compute resource memory management": the ECS agent registers for jobs the memory the
#: OS reports, which is less than the installed memory (its one example: an m4.large's 8 GiB installed is
#: 8,373,026,816 bytes, 7,985 MiB, to the OS); that example's share is taken for every type
OS_VISIBLE_SHARE = 7_985 / 8_192
#: the same page and "Reserve system memory": the default Batch AMI's ECS agent reserves 32 MiB
#: (ECS_RESERVED_MEMORY, left at its default)
ECS_RESERVED_MIB = 32
JOB_MEMORY_SOURCE = ("https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html (an m4.large's "
                     "8,192 MiB is 7,985 MiB to the OS); "
                     "https://docs.aws.amazon.com/batch/latest/userguide/ecs-reserved-memory.html (32 MiB reserved)")
MOTO_DATA = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
MOTO_VERSION: str = moto.__version__


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    #: the installed memory (EC2's MemoryInfo.SizeInMiB)
    memory_mib: int
    #: what Batch can give jobs on it (:func:`job_memory_mib`)
    job_memory_mib: int


def job_memory_mib(memory_mib: int) -> int:
    """The memory Batch registers for jobs on an instance of ``memory_mib`` installed: what the OS reports less
    what the ECS agent reserves."""
    return int(memory_mib * OS_VISIBLE_SHARE) - ECS_RESERVED_MIB


@functools.cache
def described_types() -> dict[str, Any]:
    """EC2's DescribeInstanceTypes, keyed by type (moto's copy)."""
    with gzip.open(MOTO_DATA) as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


@functools.cache
def instance_types() -> dict[str, InstanceType]:
    """Every instance type EC2 describes, by name."""
    out = {}
    for name, d in described_types().items():
        memory = int(d["MemoryInfo"]["SizeInMiB"])
        out[name] = InstanceType(name, int(d["VCpuInfo"]["DefaultVCpus"]), memory, job_memory_mib(memory))
    return out


def family_of(instance_type: str) -> str:
    return instance_type.partition(".")[0]


def expand(given: Iterable[str]) -> list[InstanceType]:
    """A compute environment's ``instanceTypes`` (families or types) as instance types; an unknown name gives
    nothing."""
    known = instance_types()
    out: list[InstanceType] = []
    for name in given:
        if "." in name:
            out += [known[name]] if name in known else []
        else:
            out += [t for t in known.values() if family_of(t.name) == name]
    return out
