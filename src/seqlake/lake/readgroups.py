"""The per-sample BAM's read groups (SAM ``@RG``; docs/INTERNALS.md, "Read groups"): the one home of what a
read group is (:class:`ReadGroup`: its fields and its header line) and of which group a read is in
(:class:`ShardGroups`).

One read group per sample and lane: a read's lane is the samplesheet row's ``lane`` column, else the lane of
its Illumina read name (``instrument:run:flowcell:lane:tile:x:y``, or the older ``instrument:lane:...``); its
flowcell (or, for the older names, its instrument) comes from the name. So a sample of two samplesheet rows
(two lanes, two FASTQ pairs) has two groups, and so has one FASTQ of two lanes concatenated. A read whose
lane is known by neither is in the sample's group of no lane, ``ID`` the sample (as before read groups had
lanes): with no lane there is nothing to tell apart.

The fields: ``ID`` the sample, then the flowcell (or instrument) and the lane where known, dot-separated (the
sample stays in the ID so that BAMs of several samples merge without collisions); ``SM`` the sample; ``LB``
the samplesheet's ``library`` column, else the sample (one library per sample is the common case and what
duplicate marking would then assume); ``PL`` from the minimap2 preset; ``PU`` ``<flowcell>.<lane>`` (GATK's
platform unit) where both are known.

The child names each record's group in its ``RG:Z`` tag and lists the groups it saw in its manifest (per
shard); the commit writes every group of a sample into its BAM's header (:func:`seqlake.reduce.bams.header_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from seqlake.base.metadata import illumina_fields

if TYPE_CHECKING:
    import pyarrow as pa

I64 = npt.NDArray[np.int64]

#: minimap2's preset -> the read group's platform (``PL``)
PLATFORMS = {"sr": "ILLUMINA", "map-ont": "ONT", "map-hifi": "PACBIO", "map-pb": "PACBIO"}
#: the samplesheet column that names a row's library (``LB``); any other extra column stays metadata only
LIBRARY_COLUMN = "library"
#: a CASAVA 1.8+ name's part up to its lane, and the older names' (base/metadata's patterns, cut at the lane)
_CASAVA_PREFIX = r"^([^:\s]+:\d+:[^:\s]+:\d+):\d+:\d+:\d+(?:\s.*)?$"
_OLD_PREFIX = r"^([^:\s]+:\d+):\d+:\d+:\d+(?:#\S*)?(?:/[12])?(?:\s.*)?$"


def platform(preset: str) -> str:
    """``PL`` of the reads a preset aligns (ILLUMINA where the preset does not say)."""
    return PLATFORMS.get(preset, "ILLUMINA")


@dataclass(frozen=True)
class ReadGroup:
    """One ``@RG`` line's fields (``unit``: ``PU``, empty when not known)."""

    id: str
    sample: str
    library: str
    platform: str
    unit: str = ""

    def header_line(self) -> str:
        fields = [("ID", self.id), ("SM", self.sample), ("LB", self.library), ("PL", self.platform),
                  ("PU", self.unit)]
        return "@RG\t" + "\t".join(f"{k}:{v}" for k, v in fields if v)

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, str]) -> ReadGroup:
        return cls(**{k: str(v) for k, v in d.items()})


def read_group(sample: str, metadata: Mapping[str, str], name_fields: Mapping[str, str], preset: str) -> ReadGroup:
    """The group of a sample's read from a samplesheet row (``metadata``: its extra columns) and the fields of
    its name (:func:`seqlake.base.metadata.illumina_fields`; empty when it is not an Illumina name). The
    samplesheet's lane wins over the name's, as it does in the ``samples`` table."""
    lane = (metadata.get("lane") or "").strip() or name_fields.get("lane", "")
    unit = name_fields.get("flowcell") or name_fields.get("instrument", "")
    ident = ".".join(p for p in (sample, unit if lane else "", lane) if p)
    library = (metadata.get(LIBRARY_COLUMN) or "").strip() or sample
    return ReadGroup(ident, sample, library, platform(preset), f"{unit}.{lane}" if unit and lane else "")


class ShardGroups:
    """The read groups of one shard's reads (one samplesheet row of one sample): each batch's reads' groups,
    and every group seen, in the order first seen."""

    def __init__(self, sample: str, metadata: Mapping[str, str], preset: str) -> None:
        self.sample, self.metadata, self.preset = sample, dict(metadata), preset
        self.seen: dict[str, ReadGroup] = {}
        #: name prefix (up to the lane) -> its group, for the batch's common case of one prefix
        self._by_prefix: dict[str, ReadGroup] = {}

    def _group(self, prefix: str) -> ReadGroup:
        if prefix not in self._by_prefix:
            # a prefix is a name cut at its lane: completed with a tile and coordinates it parses as one
            fields = illumina_fields(prefix + ":1:1:1") if prefix else {}
            self._by_prefix[prefix] = read_group(self.sample, self.metadata, fields, self.preset)
        g = self._by_prefix[prefix]
        self.seen.setdefault(g.id, g)
        return g

    def of(self, names: pa.Array | pa.ChunkedArray) -> tuple[list[str], I64]:
        """The groups' IDs of a batch's reads and each read's index into them. One starts-with test when every
        name shares the first one's prefix (a lane's FASTQ); a regex per read only when they do not."""
        import pyarrow as pa  # here: the manifests import this module, and a QC-only child loads no compute
        import pyarrow.compute as pc
        n = len(names)
        if n == 0:
            return [], np.zeros(0, dtype=np.int64)
        first = str(names[0].as_py())
        fields = illumina_fields(first)
        if not fields:
            return [self._group("").id], np.zeros(n, dtype=np.int64)
        cut = 4 if "flowcell" in fields else 2
        prefix = ":".join(first.split(":")[:cut])
        if pc.all(pc.starts_with(names, prefix + ":")).as_py():
            return [self._group(prefix).id], np.zeros(n, dtype=np.int64)
        # mixed lanes (concatenated FASTQs): each read's prefix, "" where its name is not Illumina's
        prefixes = pc.if_else(pc.match_substring_regex(names, _CASAVA_PREFIX),
                              pc.replace_substring_regex(names, _CASAVA_PREFIX, r"\1"),
                              pc.if_else(pc.match_substring_regex(names, _OLD_PREFIX),
                                         pc.replace_substring_regex(names, _OLD_PREFIX, r"\1"), ""))
        coded = pc.dictionary_encode(prefixes)
        if isinstance(coded, pa.ChunkedArray):
            coded = coded.combine_chunks()
        ids = [self._group(str(p)).id for p in coded.dictionary.to_pylist()]
        # two prefixes may be one group (the samplesheet's lane over both): index the distinct IDs
        distinct = list(dict.fromkeys(ids))
        remap = np.array([distinct.index(i) for i in ids], dtype=np.int64)
        return distinct, remap[np.asarray(coded.indices, dtype=np.int64)]
