"""Writes ``src/seqlake/base/instance_types.json`` (:mod:`seqlake.base.instances`), the one home of the
instance facts the plan and the local cloud read; ``--check`` (``make lint``) exits 1 when the file is not
what this would write.

Its sources:

- each type's vCPUs and installed memory: EC2's ``DescribeInstanceTypes`` (``VCpuInfo.DefaultVCpus``,
  ``MemoryInfo.SizeInMiB``) as moto's ``ec2/resources/instance_types.json.gz`` records it (moto's version is
  written into the file: a moto upgrade that changes a number makes ``--check`` fail);
- the families: every family of the template's ``RegionInstanceTypes`` mapping (the ``InstanceTypes``
  default of each region), :data:`SUGGESTED_FAMILIES` (what docs/DEPLOY.md, "Compute", suggests naming) and
  Batch's ``optimal`` (:data:`localcloud.rules.OPTIMAL_FAMILIES`);
- the memory Batch can give jobs on an instance (:data:`localcloud.instances.OS_VISIBLE_SHARE`,
  :data:`~localcloud.instances.ECS_RESERVED_MIB`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from localcloud.instances import (
    ECS_RESERVED_MIB,
    JOB_MEMORY_SOURCE,
    MOTO_VERSION,
    OS_VISIBLE_SHARE,
    described_types,
)
from localcloud.rules import OPTIMAL_FAMILIES
from seqlake.base import instances

#: families a user may name in ``InstanceTypes`` besides the regions' defaults (docs/DEPLOY.md, "Compute":
#: r for the default 7.5 GiB a vCPU, m and c for small genomes with a lower WorkerMemoryMiB)
SUGGESTED_FAMILIES = ("r5", "r5a", "r5b", "r5n", "r6i", "r6a", "r7i", "r7a",
                      "m5", "m5a", "m6i", "m6a", "m7i", "m7a",
                      "c5", "c5a", "c6i", "c6a", "c7i", "c7a")


def template_families(template: dict[str, Any]) -> list[str]:
    """Every family of the template's ``RegionInstanceTypes`` mapping."""
    mapping = template.get("Mappings", {}).get("RegionInstanceTypes", {})
    return sorted({f for region in mapping.values() for f in str(region["Families"]).split(",") if f})


def render(template: dict[str, Any], described: dict[str, Any]) -> str:
    """The data file's text: ``described`` is EC2's DescribeInstanceTypes keyed by type (moto's copy)."""
    families = sorted({*template_families(template), *SUGGESTED_FAMILIES, *OPTIMAL_FAMILIES})
    rows = []
    for name in sorted(described, key=lambda n: (instances.family_of(n), described[n]["VCpuInfo"]["DefaultVCpus"],
                                                 n)):
        if instances.family_of(name) not in families:
            continue
        vcpus = int(described[name]["VCpuInfo"]["DefaultVCpus"])
        memory = int(described[name]["MemoryInfo"]["SizeInMiB"])
        job = instances.job_memory_mib(memory, OS_VISIBLE_SHARE, ECS_RESERVED_MIB)
        rows.append(f'    {json.dumps(name)}: [{vcpus}, {memory}, {job}]')
    head = {
        "generated_by": "python -m seqlake.local.instance_data (do not edit by hand)",
        "source": f"EC2 DescribeInstanceTypes (VCpuInfo.DefaultVCpus, MemoryInfo.SizeInMiB) as moto {MOTO_VERSION} "
                  "records it: moto/ec2/resources/instance_types.json.gz",
        "job_memory": {"os_visible_share": round(OS_VISIBLE_SHARE, 6), "reserved_mib": ECS_RESERVED_MIB,
                       "formula": "int(memory_mib * os_visible_share) - reserved_mib", "source": JOB_MEMORY_SOURCE},
        "families": families,
        # the template's InstanceTypes default (empty) in each region: the plan Lambda reads its region's
        "region_families": {region: str(v["Families"]).split(",") for region, v in
                            sorted(template.get("Mappings", {}).get("RegionInstanceTypes", {}).items())},
        "columns": ["vcpus", "memory_mib", "job_memory_mib"],
    }
    text = json.dumps(head, indent=2)[:-2]  # the head's fields, then the types one a line
    return text + ',\n  "types": {\n' + ",\n".join(rows) + "\n  }\n}\n"


def main(argv: list[str] | None = None) -> int:
    """Write the data file (``--check``: exit 1 if it is out of date)."""
    from localcloud.packaging import load_template
    from seqlake.local.appdir import CHECKOUT

    args = sys.argv[1:] if argv is None else argv
    new = render(load_template(CHECKOUT / "template.yaml"), described_types())
    path = instances.DATA_PATH
    if "--check" in args:
        if not path.exists() or path.read_text(encoding="utf-8") != new:
            print(f"{path}: out of date: python -m seqlake.local.instance_data", file=sys.stderr)
            return 1
        return 0
    path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
