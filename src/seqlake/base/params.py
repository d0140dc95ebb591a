"""Run parameters: one dataclass, serialised into plan.json and the ``runs`` table.

Defaults follow what users of cutadapt / fastp / minimap2 expect for Illumina short reads:
3' quality trimming at Phred 20 (cutadapt ``-q 20``, BWA's algorithm), removal of the Illumina
TruSeq / Nextera adapter prefixes with cutadapt's aligner (``-a AGATCGGAAGAGC``, ``-e 0.1``,
minimum overlap 3), and a minimum length of 20 after trimming (``-m 20``); a pair is dropped if
either mate becomes too short (cutadapt's default ``--pair-filter=any``).

Long reads (Nanopore, PacBio) are aligned with minimap2's long-read presets, chosen by the ``preset``
parameter (``seqlake process --preset map-ont``), never guessed from the reads: a child sees only its
shard, so a guess could differ between the children of one run, and the preset is part of the run id
(the same files aligned another way are another run) and of what keys the reference index (minimap2
builds an index per preset: ``sr`` k=21 w=11, ``map-ont`` k=15 w=10, ``map-hifi`` k=19 w=19).
Trimming is the same for every preset; its defaults are Illumina's (Phred 20, Illumina adapters): for
Nanopore reads lower ``--quality-cutoff`` or use ``--no-trim``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: bases per region of the reduce step: ~640 reducers for GRCh38 (631 windows of its 24 chromosomes), one for
#: anything up to 5 Mb. A reducer's memory no longer grows with it (it works a :data:`REDUCE_WINDOW` at a time:
#: bench/reduce.py --alleles, 1,122 / 1,222 / 1,299 MiB for 1 / 5 / 25 Mb regions at 30x with variants called,
#: under the template's ``ReducerMemoryMiB`` of 2,048); what it sets is the reducers' number and each one's
#: time (~15 CPU-seconds per Mb and 30x sample). It divides every coverage bin width of
#: :func:`coverage_bin_width`'s ladder up to 5 Mb, so the bins stay as wide as the genome asks
DEFAULT_REGION_SIZE = 5_000_000
#: bases a reducer merges and finishes at a time inside its region (seqlake.lake.regions.windows): what it holds
#: grows with this, not with ``region_size``; rounded down to a multiple of the coverage bin width
#: (:func:`seqlake.lake.regions.window_size`) so that no bin straddles two windows
REDUCE_WINDOW = 1_000_000
#: Illumina TruSeq (also the 3' adapter of most Illumina kits) and Nextera transposase adapters.
DEFAULT_ADAPTERS: tuple[str, ...] = ("AGATCGGAAGAGC", "CTGTCTCTTATACACATCT")
#: minimap2 presets a run may align with: Illumina short reads, then the long-read ones
SHORT_READ_PRESET = "sr"
LONG_READ_PRESETS: tuple[str, ...] = ("map-ont", "map-hifi", "map-pb")
PRESETS: tuple[str, ...] = (SHORT_READ_PRESET, *LONG_READ_PRESETS)


@dataclass(frozen=True)
class Params:
    trim: bool = True
    quality_cutoff: int = 20
    quality_cutoff_5p: int = 0
    adapters: tuple[str, ...] = DEFAULT_ADAPTERS
    adapter_max_error_rate: float = 0.1
    adapter_min_overlap: int = 3
    min_length: int = 20
    #: minimap2 preset for the reference alignment, one of :data:`PRESETS` (what keys the reference index too)
    preset: str = SHORT_READ_PRESET
    #: width of the ``coverage`` bins in bases, for references of up to ``coverage_bins_max`` bins; a longer
    #: reference gets the next of 2x, 5x, 10x, 20x, ... this width that keeps a sample's bins under
    #: ``coverage_bins_max`` (GRCh38: 5,000 bases; :func:`coverage_bin_width`)
    coverage_bin: int = 100
    #: the most ``coverage`` rows per sample before the bins widen; 0: never widen
    coverage_bins_max: int = 1_000_000
    #: bases per region of the reduce step (seqlake.lake.regions); the coverage bin width must divide it
    region_size: int = DEFAULT_REGION_SIZE
    #: planning target; the shard count is capped at 10,000 (the Batch array limit)
    reads_per_shard: int = 2_000_000
    #: allele counts, variants and consensus (off: the child counts nothing and the commit calls nothing)
    allele_counts: bool = True
    #: allele counting, variants and consensus (nf-core/viralrecon's ivar settings; seqlake.lake.alleles):
    #: bases below this Phred quality are counted only in the ``*_all`` columns (``ivar -q``)
    min_base_quality: int = 20
    #: a position needs this SNV depth to carry variants (``ivar variants -m``)
    variant_min_depth: int = 10
    #: frequency a variant needs to PASS (``ivar variants -t``)
    variant_freq: float = 0.25
    #: frequency an allele needs to be a ``variants`` row at all (with its filters)
    variant_report_freq: float = 0.03
    #: consensus frequency threshold and minimum depth (``ivar consensus -t / -m``)
    consensus_freq: float = 0.75
    consensus_min_depth: int = 10
    #: each sample's alignments as CRAM 3.0 (``<sample>.cram`` + ``.crai``) instead of the BAM, the run's
    #: reference kept beside them (``reference.fasta``: CRAM stores bases as differences from it)
    cram: bool = False
    #: amplicon mode: a primer BED (local path or s3:// URI); primers are soft-clipped from the alignments
    #: before counting, as ``samtools ampliconclip --both-ends --strand`` (seqlake.child.primerclip)
    primer_bed: str | None = None
    #: a GFF3 of the reference's CDS (local path or s3:// URI): each variant in a CDS gets its gene, codons and
    #: amino acids as ``ivar variants -g`` writes them, and an ``aa_change`` (seqlake.lake.annotate)
    gff: str | None = None
    #: the QC verdict per genome (``sample_summary.qc_status``, seqlake.lake.verdict), defaults after
    #: ncov-tools' summary flags: a consensus with fewer called bases than ``qc_fail_called_pct`` % of the
    #: reference fails (ncov-tools INCOMPLETE_GENOME, < 50 %), fewer than ``qc_warn_called_pct`` % warns
    #: (PARTIAL_GENOME, < 90 %)
    qc_fail_called_pct: float = 50.0
    qc_warn_called_pct: float = 90.0
    #: more IUPAC codes than this in the consensus warn (ncov-tools EXCESS_AMBIGUITY: more than 5)
    qc_max_ambiguous: int = 5
    #: a mixed sample: at least ``qc_mixed_alleles`` SNV alleles at a frequency in [``qc_mixed_min_fraction``,
    #: ``qc_mixed_max_fraction``] where the depth is at least ``qc_mixed_min_depth`` warn (ncov-tools'
    #: POSSIBLE_MIXTURE; the thresholds are seqlake's, see docs/TABLES.md "The QC verdict": the real ARTIC MiSeq
    #: pair, one genome, shows 6 such alleles, a library of two genomes dozens)
    qc_mixed_min_depth: int = 50
    qc_mixed_min_fraction: float = 0.05
    qc_mixed_max_fraction: float = 0.95
    qc_mixed_alleles: int = 10
    #: a negative control with more of the genome than this percentage at >= 10x fails (contamination)
    qc_negative_max_pct_10x: float = 1.0
    #: the primer BED's content, ``sha256:<hex>`` (set where a run starts, never by hand: ``aws/start.py``, ``seqlake
    #: process``, ``local run``), so the BED is part of the run id and a BED changed since is caught by the plan
    primer_bed_pin: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"unknown minimap2 preset {self.preset!r}: one of {', '.join(PRESETS)}")
        if self.coverage_bin < 1 or self.region_size < 1:
            raise ValueError(f"coverage_bin ({self.coverage_bin}) and region_size ({self.region_size}) must be "
                             "positive numbers of bases")
        if self.region_size % self.coverage_bin:  # a bin must not straddle two regions
            raise ValueError(f"the coverage bin width ({self.coverage_bin}) must divide the region size "
                             f"({self.region_size})")

    @property
    def long_reads(self) -> bool:
        """Aligned with a long-read preset."""
        return self.preset in LONG_READ_PRESETS

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["adapters"] = list(self.adapters)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Params:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "adapters" in kw:
            kw["adapters"] = tuple(kw["adapters"])
        return cls(**kw)


def coverage_bin_width(params: Params, reference_length: int) -> int:
    """The run's coverage bin width: ``coverage_bin``, times the first of 1, 2, 5, 10, 20, 50, ... that
    keeps the reference under ``coverage_bins_max`` bins (100 bases up to 100 Mb, 2,000 for 1.5 Gb,
    5,000 for GRCh38), made to divide ``region_size`` so that no bin straddles two regions."""
    width, k = params.coverage_bin, 0
    while params.coverage_bins_max and reference_length > width * params.coverage_bins_max:
        width = width * (2, 5, 10)[k % 3] // (1, 2, 5)[k % 3]
        k += 1
    return math.gcd(width, params.region_size)


#: the run parameters set on the command line by a flag of their own name (``--min-depth`` sets
#: ``variant_min_depth``): flag -> (parameter, type, what it is); cli.py adds them to ``process`` and ``local run``
VALUE_FLAGS: dict[str, tuple[str, type, str]] = {
    "--gff": ("gff", str, "a GFF3 of the reference's CDS (path or s3:// URI): each variant in a CDS gets its gene, "
                          "codons, amino acids (as ivar variants -g) and an aa_change such as S:N501Y"),
    "--min-depth": ("variant_min_depth", int, "depth a position needs to carry variants (ivar variants -m)"),
    "--min-fraction": ("variant_freq", float, "allele frequency a variant needs to PASS (ivar variants -t)"),
    "--report-fraction": ("variant_report_freq", float, "allele frequency a variant needs to be a row at all"),
    "--min-base-quality": ("min_base_quality", int, "bases below this quality count in no variant or consensus "
                                                    "(ivar -q)"),
    "--consensus-fraction": ("consensus_freq", float, "allele frequency a consensus base needs (ivar consensus -t)"),
    "--consensus-min-depth": ("consensus_min_depth", int, "depth a consensus base needs, else N (ivar consensus "
                                                          "-m)"),
}


def chosen_parameters(args: Any) -> dict[str, Any]:
    """The run parameters a command line set (``--no-trim``, ``--adapter``, ``--quality-cutoff``,
    ``--min-length``, ``--primer-bed``, ``--no-allele-counts``, ``--cram``, ``--preset`` and :data:`VALUE_FLAGS`:
    ``seqlake process`` and ``seqlake local run`` take the same); the others keep :class:`Params`' defaults."""
    chosen = {"trim": False if args.no_trim else None, "adapters": args.adapter,
              "quality_cutoff": args.quality_cutoff, "min_length": args.min_length, "preset": args.preset,
              "primer_bed": getattr(args, "primer_bed", None),
              "allele_counts": False if getattr(args, "no_allele_counts", False) else None,
              "cram": True if getattr(args, "cram", False) else None}
    for flag, (name, _, _) in VALUE_FLAGS.items():
        chosen[name] = getattr(args, flag[2:].replace("-", "_"), None)
    return {k: v for k, v in chosen.items() if v is not None}


# ------------------------------------------------------------------------------- run parameters per upload
#: the file beside an upload (a batch folder's ``incoming/<batch>/params.json``, or beside ``samplesheet.csv``)
#: that sets its run's parameters; the stack's ``RunParameters`` (the command line's, for ``seqlake process``)
#: are the defaults it overrides
PARAMS_FILE = "params.json"
#: fields a params.json may not set: derived where the run starts (the BED's pin), or free-form
NOT_SETTABLE: frozenset[str] = frozenset({"primer_bed_pin", "extra"})
#: JSON Schema types of the annotations :class:`Params` uses (an annotation not here is not settable by file)
_JSON_TYPES: dict[str, dict[str, Any]] = {
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "str": {"type": "string", "minLength": 1},
    "str | None": {"type": ["string", "null"], "minLength": 1},
    "tuple[str, ...]": {"type": "array", "items": {"type": "string", "minLength": 1}},
}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a params.json, generated from :class:`Params` (the one home of the parameters;
    ``schemas/params.schema.json`` is this, written out for readers: a test keeps them equal)."""
    defaults = Params().to_dict()
    properties: dict[str, Any] = {}
    for f in fields(Params):
        kind = _JSON_TYPES.get(str(f.type))
        if f.name in NOT_SETTABLE or kind is None:
            continue
        prop = {**kind, "default": defaults[f.name]}
        if f.name == "preset":
            prop["enum"] = list(PRESETS)
        elif kind.get("type") in ("integer", "number"):
            prop["minimum"] = 0
        properties[f.name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://seqlake.invalid/schemas/params.schema.json",
        "title": "seqlake run parameters (params.json beside an upload)",
        "description": "Any subset of seqlake's run parameters; those not given keep the stack's (RunParameters) "
                       "or the command line's. Paths (primer_bed, ...) are s3:// URIs or keys relative to the "
                       "params.json's folder.",
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }


def read_params_file(uri: str, data: bytes) -> dict[str, Any]:
    """A params.json's parameters, checked against :func:`json_schema` and :class:`Params`' own rules;
    :class:`~seqlake.base.errors.BadInputError` names the file (and the line of a JSON syntax error, or the
    parameter) otherwise."""
    import jsonschema

    from seqlake.base.errors import BadInputError

    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise BadInputError(uri, f"not UTF-8 text: byte {err.start}") from None
    except json.JSONDecodeError as err:
        raise BadInputError(uri, f"not JSON: {err.msg} (column {err.colno})", line=err.lineno) from None
    errors = sorted(jsonschema.Draft202012Validator(json_schema()).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = ".".join(map(str, first.path)) or "the document"
        raise BadInputError(uri, f"{where}: {first.message}")
    try:
        Params.from_dict(doc)
    except ValueError as err:
        raise BadInputError(uri, str(err)) from None
    checked: dict[str, Any] = doc
    return checked


def read_local_params_file(path: str) -> dict[str, Any]:
    """``--params FILE`` of ``seqlake process`` / ``local run``: :func:`read_params_file` of a local file, its
    relative paths made absolute against the file's folder; bad input (65) when it is missing."""
    from pathlib import Path

    from seqlake.base.errors import BadInputError

    file = Path(path)
    if not file.is_file():
        raise BadInputError(path, "no such file (--params)")
    return resolve_paths(read_params_file(path, file.read_bytes()), str(file.resolve().parent))


def resolve_paths(parameters: dict[str, Any], folder: str) -> dict[str, Any]:
    """``parameters`` with a relative ``primer_bed`` (and any ``*_bed`` / ``gff`` path) made absolute against
    ``folder`` (the params.json's folder: a local directory or an ``s3://`` prefix ending in ``/``)."""
    out = dict(parameters)
    for key, value in parameters.items():
        if (key.endswith("_bed") or key == "gff") and isinstance(value, str) and not (
                value.startswith(("s3://", "/"))):
            out[key] = folder.rstrip("/") + "/" + value
    return out
