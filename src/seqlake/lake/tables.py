"""The result tables: the one source of their schemas.

Everything else is generated from here: the Parquet schemas the worker and the commit step write,
the Glue table definitions in ``template.yaml`` (checked by a test), the local catalog, and the
table reference in ``docs/TABLES.md`` (``python -m seqlake.lake.tables --markdown``).

Every result table is an Apache Iceberg table (format version 2, :mod:`seqlake.lake.iceberg`) partitioned
by ``run_id`` (identity), its files where a run's commit put them (``results/<table>/run_id=<id>/``): a run is
committed, rolled back and deleted as one unit, and queries that name a run prune all others. ``runs``, the
run log every step writes a row of (a rejected upload's too), stays a Hive table with a ``run_id`` partition
per row: a failure is recorded by one partition, without an Iceberg commit.
``sample`` is a column, not a partition key: a run holds one sample or a small samplesheet, and a
partition per sample would multiply tiny files without pruning anything useful.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from seqlake.base.model import FINAL_STATES

#: the depth thresholds of ``sample_summary``, ``contig_coverage`` and ``low_coverage`` (their columns)
THRESHOLDS: tuple[int, ...] = (1, 10, 20, 30)
#: depths are summed up to here (see :mod:`seqlake.lake.depth`); here, not there, so that this module needs
#: no numpy (the start Lambda writes a rejected run's row without it)
DEPTH_CAP = max(THRESHOLDS)

#: Glue / Athena (Hive DDL) names of the Arrow types used here.
_GLUE_TYPES: dict[pa.DataType, str] = {
    pa.string(): "string",
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.timestamp("ms", tz="UTC"): "timestamp",
}

#: Hive types Iceberg has no type of: read as ``int`` (the Parquet files keep their narrow types)
_ICEBERG_NARROW: dict[str, str] = {"tinyint": "int", "smallint": "int"}

PARTITION_KEYS: tuple[tuple[str, str], ...] = (("run_id", "string"),)


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True

    @property
    def glue_type(self) -> str:
        return _GLUE_TYPES[self.type]

    @property
    def iceberg_glue_type(self) -> str:
        """The Glue type of the column in an Iceberg table: Iceberg has no 8- or 16-bit integers (``int``)."""
        return _ICEBERG_NARROW.get(self.glue_type, self.glue_type)


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    #: columns that identify a row; the remaining numeric columns are additive across shards
    key: tuple[str, ...] = field(default=())

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def is_iceberg(self) -> bool:
        """An Iceberg table (every result table); ``runs`` is a Hive table."""
        return self.name in ICEBERG_TABLES

    def glue_table_input(self, location: str) -> dict[str, Any]:
        """The ``TableInput`` of Glue's CreateTable (and of AWS::Glue::Table) for this table: for an Iceberg
        table, what Athena requires of one in Glue (``table_type`` ``ICEBERG``; Glue writes its metadata and
        ``metadata_location`` from the template's ``OpenTableFormatInput``), ``run_id`` a column, not a Hive
        partition key (Iceberg partitions hide in its metadata)."""
        if self.is_iceberg:
            columns = [{"Name": c.name, "Type": c.iceberg_glue_type, "Comment": c.doc[:255]} for c in self.columns]
            columns += [{"Name": n, "Type": t, "Comment": "the run's id (the Iceberg partition)"}
                        for n, t in PARTITION_KEYS]
            return {
                "Name": self.name,
                "Description": self.doc,
                "TableType": "EXTERNAL_TABLE",
                "Parameters": {"table_type": "ICEBERG"},
                "StorageDescriptor": {"Columns": columns, "Location": location},
            }
        return {
            "Name": self.name,
            "Description": self.doc,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": {"classification": "parquet", "EXTERNAL": "TRUE", "parquet.compression": "ZSTD"},
            "PartitionKeys": [{"Name": n, "Type": t} for n, t in PARTITION_KEYS],
            "StorageDescriptor": {
                "Columns": [{"Name": c.name, "Type": c.glue_type, "Comment": c.doc[:255]} for c in self.columns],
                "Location": location,
                "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                "SerdeInfo": {
                    "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                    "Parameters": {"serialization.format": "1"},
                },
            },
        }


def _c(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


_I64, _I32, _I8, _F64, _S, _B = pa.int64(), pa.int32(), pa.int8(), pa.float64(), pa.string(), pa.bool_()
_TS = pa.timestamp("ms", tz="UTC")

_SAMPLE = _c("sample", _S, "sample name (samplesheet `sample`, or the file name without mate suffix)", False)
_MATE = _c("mate", _I8, "1 or 2 (1 for single-end)", False)
_STAGE = _c("stage", _S, "`raw` (before trimming) or `trimmed` (after trimming and filtering)", False)

QC_SUMMARY = Table(
    "qc_summary",
    "Read QC per run, sample, mate and stage; raw numbers equal `seqkit stats -a`.",
    (
        _SAMPLE, _MATE, _STAGE,
        _c("reads", _I64, "number of reads", False),
        _c("bases", _I64, "number of bases (sum of read lengths)", False),
        _c("min_len", _I64, "shortest read length (0 when there are no reads)", False),
        _c("max_len", _I64, "longest read length", False),
        _c("avg_len", _F64, "mean read length"),
        _c("q1_len", _F64, "first quartile of read length (as seqkit Q1)"),
        _c("q2_len", _F64, "median read length (as seqkit Q2)"),
        _c("q3_len", _F64, "third quartile of read length (as seqkit Q3)"),
        _c("n50", _I64, "N50 of read lengths (as seqkit N50)"),
        _c("q20_bases", _I64, "bases with Phred quality >= 20", False),
        _c("q30_bases", _I64, "bases with Phred quality >= 30", False),
        _c("gc_bases", _I64, "G, C, g, c bases", False),
        _c("n_bases", _I64, "N or other IUPAC ambiguity codes (anything but ACGT, either case)", False),
        _c("mean_quality", _F64, "arithmetic mean of the bases' Phred scores (as FastQC, fastp and MultiQC)"),
        _c("mean_error_quality", _F64, "Phred value of the bases' mean error probability (seqkit's AvgQual, "
           "several points below mean_quality: not the mean score)"),
        _c("reads_adapter_trimmed", _I64, "reads from which an adapter was removed (trimmed stage)"),
        _c("bases_quality_trimmed", _I64, "bases removed by 3'/5' quality trimming (trimmed stage)"),
        _c("bases_adapter_trimmed", _I64, "bases removed with adapters (trimmed stage)"),
        _c("reads_too_short", _I64, "reads of this mate removed by the minimum length filter (trimmed stage; a "
           "pair goes when either mate is too short, so both mates' rows count it)"),
        _c("bases_too_short", _I64, "bases removed with reads that became too short (trimmed stage)"),
        _c("mapped_reads", _I64, "reads with a primary alignment (with a reference; trimmed stage)"),
        _c("properly_paired", _I64, "reads flagged proper pair, 0x2 (paired-end with a reference)"),
        _c("mean_mapq", _F64, "mean MAPQ of primary alignments"),
        _c("mean_span_depth", _F64, "mean depth over the whole reference counting whole alignment spans "
           "(deletions count, as mosdepth --fast-mode); a per-sample figure repeated on both mates' rows "
           "(sample_summary.mean_depth counts aligned bases only)"),
        _c("pct_span_breadth", _F64, "percentage of reference bases with span depth >= 1 (whole spans, as "
           "mean_span_depth)"),
    ),
    key=("sample", "mate", "stage"),
)

QC_POSITION = Table(
    "qc_position",
    "Per-cycle quality and base composition (FastQC's per-base plots).",
    (
        _SAMPLE, _MATE, _STAGE,
        _c("cycle", _I32, "1-based position in the read", False),
        _c("reads", _I64, "reads long enough to have this cycle", False),
        _c("mean_qual", _F64, "mean Phred quality at this cycle"),
        _c("qual_sum", _I64, "sum of Phred qualities at this cycle (additive across shards)", False),
        _c("a", _I64, "A bases at this cycle (either case)", False),
        _c("c", _I64, "C bases", False),
        _c("g", _I64, "G bases", False),
        _c("t", _I64, "T bases", False),
        _c("n", _I64, "N and other non-ACGT bases", False),
    ),
    key=("sample", "mate", "stage", "cycle"),
)

LENGTH_HIST = Table(
    "length_hist",
    "Read length histogram.",
    (_SAMPLE, _MATE, _STAGE, _c("length", _I64, "read length", False), _c("reads", _I64, "reads", False)),
    key=("sample", "mate", "stage", "length"),
)

QUALITY_HIST = Table(
    "quality_hist",
    "Quality histograms: per-base Phred scores (`bases`) and per-read mean quality, floored (`reads`).",
    (
        _SAMPLE, _MATE, _STAGE,
        _c("quality", _I32, "Phred quality value", False),
        _c("bases", _I64, "bases with this quality", False),
        _c("reads", _I64, "reads whose mean quality floors to this value", False),
    ),
    key=("sample", "mate", "stage", "quality"),
)

ALIGNMENTS = Table(
    "alignments",
    "One row per alignment of the trimmed reads (minimap2 -ax sr semantics); unmapped reads have a null contig.",
    (
        _SAMPLE, _MATE,
        _c("read_name", _S, "read name as in the FASTQ header, up to the first whitespace", False),
        _c("read_index", _I64, "0-based index of the read (pair) in the input file; null for plain single-end "
           "files above 64 MiB, which are split by byte ranges without counting their records"),
        _c("flag", _I32, "SAM flag (0x4 unmapped, 0x10 reverse, 0x100 secondary, 0x800 supplementary, ...)", False),
        _c("contig", _S, "reference sequence name; null when unmapped"),
        _c("pos", _I64, "1-based leftmost position, as in SAM"),
        _c("end_pos", _I64, "1-based inclusive rightmost reference position"),
        _c("strand", _S, "`+` or `-`; null when unmapped"),
        _c("mapq", _I32, "mapping quality"),
        _c("cigar", _S, "CIGAR string (soft clips for unaligned read ends)"),
        _c("nm", _I32, "edit distance to the reference (NM)"),
        _c("is_primary", _B, "true for the primary alignment of the read", False),
        _c("read_len", _I32, "length of the (trimmed) read"),
        _c("mate_contig", _S, "the mate's reference sequence name (SAM RNEXT, written out); null without a "
           "mapped mate"),
        _c("mate_pos", _I64, "1-based leftmost position of the mate's primary alignment (SAM PNEXT); a mapped "
           "read whose mate is unmapped carries its own position, as minimap2 writes it"),
        _c("tlen", _I64, "template length as minimap2 writes SAM TLEN: signed distance between the 5' ends of "
           "this alignment and the mate's primary, 0 on different contigs or with an unmapped mate; null for "
           "single-end reads"),
    ),
)

COVERAGE = Table(
    "coverage",
    "Depth per sample, contig and fixed-width bin (primary and supplementary alignment spans).",
    (
        _SAMPLE,
        _c("contig", _S, "reference sequence name", False),
        _c("bin_start", _I64, "0-based start of the bin (BED convention; `pos` is the same base, 1-based)", False),
        _c("bin_end", _I64, "exclusive 0-based end of the bin, which is also its 1-based last base (the contig end "
           "for the last bin)", False),
        _c("pos", _I64, "1-based first base of the bin (bin_start + 1): with bin_end, the bin in the 1-based "
           "inclusive convention of alignments and low_coverage", False),
        _c("depth_sum", _I64, "sum of per-base span depth over the bin (additive across shards)", False),
        _c("mean_span_depth", _F64, "depth_sum / (bin_end - bin_start): mean depth of whole alignment spans "
           "(deletions count)", False),
        _c("covered_bases", _I64, "bases in the bin with depth >= 1", False),
    ),
    key=("sample", "contig", "bin_start"),
)

_PCT_AT = tuple(
    _c(f"pct_genome_{t}x", _F64, f"percentage of the reference's bases with depth >= {t} (as `samtools depth -a`)")
    for t in THRESHOLDS
)

SAMPLE_SUMMARY = Table(
    "sample_summary",
    "One row per run and sample: the figures a lab reads first. Quality figures are of the raw reads "
    "(both mates); alignment figures follow `samtools stats` (primary alignments), depth `samtools depth -a`.",
    (
        _SAMPLE,
        _c("read_pairs_raw", _I64, "read pairs before trimming (reads for single-end samples)", False),
        _c("reads_raw", _I64, "reads before trimming, both mates (the denominator of pct_mapped)", False),
        _c("bases_raw", _I64, "bases before trimming, both mates", False),
        _c("read_pairs_trimmed", _I64, "read pairs kept by trimming and the length filter", False),
        _c("bases_trimmed", _I64, "bases kept by trimming, both mates", False),
        _c("pct_q30", _F64, "percentage of raw bases with Phred quality >= 30"),
        _c("pct_gc", _F64, "percentage of G and C among raw bases"),
        _c("mean_quality", _F64, "arithmetic mean of the raw bases' Phred scores (as FastQC, fastp, MultiQC)"),
        _c("mean_error_quality", _F64, "Phred value of the raw bases' mean error probability (seqkit's "
           "AvgQual; lower than mean_quality)"),
        _c("reads_adapter_8bp", _I64, "reads (both mates) with at least 8 bases of adapter removed"),
        _c("pct_mapped", _F64, "percentage of raw reads (both mates) with a primary alignment"),
        _c("pct_properly_paired", _F64, "percentage of raw reads flagged proper pair (0x2)"),
        _c("mean_mapq", _F64, "mean MAPQ of primary alignments"),
        _c("mean_depth", _F64, "mean depth over the reference (`samtools depth -a`: aligned bases, no "
           "deletions; overlapping mates both count)"),
        *_PCT_AT,
        _c("median_insert_size", _F64, "median |TLEN| of pairs with both mates mapped (samtools stats' IS "
           "histogram)"),
        _c("pct_error", _F64, "percentage of mismatches: 100 x mismatches (NM) / bases mapped (M, I, =, X) of "
           "primary and supplementary alignments (samtools stats' error rate, which is a fraction, x 100)"),
        _c("soft_clipped_bases", _I64, "soft-clipped bases of primary alignments"),
        _c("control", _B, "the samplesheet's `control` column (true for negative / positive controls); null "
           "without one"),
        _c("control_type", _S, "`negative` or `positive` (the samplesheet's `control`: `negative`, `positive`; "
           "`true` is read as `negative`); null for a sample that is no control"),
        _c("qc_status", _S, "the QC verdict of the genome: `pass`, `warn` or `fail` (docs/TABLES.md, \"The QC "
           "verdict\"); null without a reference"),
        _c("qc_reasons", _S, "why it is not `pass`: each failed check, `; `-separated, failures first"),
        _c("run_name", _S, "the samplesheet's `run_name`, else the run number in the Illumina read names"),
        _c("flowcell", _S, "flowcell ID from the Illumina read names (comma-separated if several)"),
        _c("lanes", _S, "comma-separated lanes (samplesheet `lane`, else from the Illumina read names)"),
        _c("instrument", _S, "instrument ID from the Illumina read names (comma-separated if several)"),
        _c("committed_at", _TS, "when the run's results were committed (the latest row per sample is the "
           "latest processing)", False),
    ),
    key=("sample",),
)

CONTIG_COVERAGE = Table(
    "contig_coverage",
    "Depth per sample and contig, exact (`samtools depth -a` semantics): mean depth and the percentage of "
    "bases at each threshold.",
    (
        _SAMPLE,
        _c("contig", _S, "reference sequence name", False),
        _c("length", _I64, "contig length", False),
        _c("mean_depth", _F64, "mean depth over the contig (`samtools depth -a`: aligned bases, no deletions)"),
        *(_c(f"pct_{t}x", _F64, f"percentage of the contig's bases with depth >= {t}") for t in THRESHOLDS),
    ),
    key=("sample", "contig"),
)

LOW_COVERAGE = Table(
    "low_coverage",
    "Merged intervals with depth below each threshold, per sample and contig (exact, `samtools depth -a` "
    "semantics; positions 1-based inclusive as SAM, IGV and samtools regions).",
    (
        _SAMPLE,
        _c("contig", _S, "reference sequence name", False),
        _c("threshold", _I32, f"depth threshold ({', '.join(map(str, THRESHOLDS))}): every base of the "
           "interval has a lower depth", False),
        _c("pos", _I64, "1-based first base of the interval", False),
        _c("end_pos", _I64, "1-based last base of the interval (inclusive)", False),
        _c("length", _I64, "bases in the interval (end_pos - pos + 1)", False),
    ),
    key=("sample", "contig", "threshold", "pos"),
)

ALIGNMENT_HIST = Table(
    "alignment_hist",
    "Alignment histograms per sample, as samtools stats counts them: `insert_size` (pairs with both mates "
    "mapped by |TLEN|, samtools' IS rows, capped at 8000) and `mapq` (mapped reads by the MAPQ of their primary).",
    (
        _SAMPLE,
        _c("metric", _S, "`insert_size` or `mapq`", False),
        _c("value", _I64, "the insert size or the MAPQ", False),
        _c("frequency", _I64, "pairs (`insert_size`) or reads (`mapq`) with this value", False),
    ),
    key=("sample", "metric", "value"),
)

VARIANTS = Table(
    "variants",
    "Variant alleles per run, sample, contig, position and allele, as ivar 1.3.1 `variants` calls them over "
    "`samtools mpileup -A -x -B -d 0 -Q 0` (nf-core/viralrecon's settings): every allele at frequency >= "
    "the run's variant_report_freq, with its filters. VCF-style 1-based positions and alleles.",
    (
        _SAMPLE,
        _c("contig", _S, "reference sequence name (ivar REGION, VCF CHROM, Glow contigName)", False),
        _c("pos", _I64, "1-based position (ivar POS, VCF POS; Glow's start is pos - 1); for an indel the "
           "reference base before it", False),
        _c("ref", _S, "reference allele, VCF style (a deletion's ref holds the anchor base and the deleted "
           "bases; ivar REF is the anchor base alone)", False),
        _c("alt", _S, "alternate allele, VCF style (an insertion's alt is the anchor base and the inserted "
           "bases; ivar ALT writes +BASES / -BASES)", False),
        _c("type", _S, "`snv`, `ins` or `del`", False),
        _c("depth", _I32, "ivar TOTAL_DP: an SNV's depth is the A/C/G/T/N bases at base quality >= "
           "min_base_quality; an indel's is every mpileup entry (deletions included)", False),
        _c("ref_count", _I32, "ivar REF_DP: reference bases at base quality >= min_base_quality", False),
        _c("ref_rev", _I32, "ivar REF_RV: of ref_count, on the reverse strand", False),
        _c("ref_qual", _I32, "ivar REF_QUAL: mean quality of those bases, truncated", False),
        _c("alt_count", _I32, "ivar ALT_DP (VCF AD's second value): reads with the alternate allele", False),
        _c("alt_fwd", _I32, "of alt_count, on the forward strand (indels: all of them, as ivar counts them)",
           False),
        _c("alt_rev", _I32, "ivar ALT_RV: of alt_count, on the reverse strand (0 for indels, as ivar)", False),
        _c("alt_qual", _I32, "ivar ALT_QUAL: mean quality of the alternate bases, truncated (indels: "
           "min_base_quality, as ivar)", False),
        _c("alt_fraction", _F64, "fraction of the depth that carries the alt allele, 0-1 (ivar ALT_FREQ, VCF AF): "
           "alt_count / depth", False),
        _c("pval", _F64, "ivar PVAL: the left tail of Fisher's exact test ivar runs", False),
        _c("filters", _S, "`PASS`, or `;`-separated failed filters: `ft` (alt_fraction below the run's "
           "variant_freq), `pv` (pval above 0.01, ivar's PASS=FALSE)", False),
        _c("pass", _B, "true when filters is PASS (ivar PASS=TRUE at ivar variants -t variant_freq)", False),
        _c("gene", _S, "with a GFF (`--gff`): the `ID` of each CDS line holding an SNV, `,`-separated in the GFF's "
           "order (ivar GFF_FEATURE, one ivar row per CDS); null outside every CDS and for indels (ivar NA)"),
        _c("ref_codon", _S, "the reference codon in each of those CDS (ivar REF_CODON), `,`-separated"),
        _c("ref_aa", _S, "its amino acid, `*` a stop, `X` unknown (ivar REF_AA), `,`-separated"),
        _c("alt_codon", _S, "the codon with this SNV alone (ivar ALT_CODON: other SNVs of the codon are not "
           "applied), `,`-separated"),
        _c("alt_aa", _S, "its amino acid (ivar ALT_AA), `,`-separated"),
        _c("aa_change", _S, "the effect on each protein holding it, `,`-separated: `S:N501Y` (SNV; `S:Q493*` a "
           "stop), `S:H69_V70del` (in-frame deletion), `S:R214_D215insEPE` (in-frame insertion), `ORF6:F22fs` "
           "(frameshift); the protein named by the CDS's `gene` attribute; null outside every CDS"),
    ),
    key=("sample", "contig", "pos", "ref", "alt"),
)

CONSENSUS = Table(
    "consensus",
    "One row per run, sample and contig: the consensus genome ivar 1.3.1 `consensus` builds over `samtools "
    "mpileup -aa -A -B -d 0 -Q 0` (the FASTA is under the run's results).",
    (
        _SAMPLE,
        _c("contig", _S, "reference sequence name", False),
        _c("length", _I64, "consensus length (insertions and deletions applied)", False),
        _c("n_bases", _I64, "N in the consensus (positions below the minimum depth or the threshold)", False),
        _c("ambiguous_bases", _I64, "IUPAC ambiguity codes other than N (mixed calls)", False),
        _c("frameshift_indels", _I64, "PASS indels whose length is not a multiple of 3 (in a CDS of the run's "
           "GFF; anywhere without one): the QC verdict's frameshift check", False),
        _c("mixed_alleles", _I64, "SNV alleles at an intermediate frequency at good depth (qc_mixed_* "
           "parameters): the QC verdict's mixed-sample signal", False),
        _c("pct_called", _F64, "percentage of the contig's reference positions with a called base (not N): "
           "0-100", False),
        _c("min_fraction", _F64, "fraction threshold used, 0-1 (ivar consensus -t)", False),
        _c("min_depth", _I32, "the minimum depth used (ivar consensus -m)", False),
        _c("min_base_quality", _I32, "the minimum base quality used (ivar consensus -q)", False),
        _c("fasta_uri", _S, "the sample's consensus FASTA", False),
    ),
    key=("sample", "contig"),
)

AMPLICON_DEPTH = Table(
    "amplicon_depth",
    "Amplicon mode: reads and depth per run, sample and amplicon of the primer scheme (`primer_bed`), and "
    "one row per sample with a null amplicon for the primary alignments no primer clipped.",
    (
        _SAMPLE,
        _c("amplicon", _S, "amplicon name (the primer names before _LEFT / _RIGHT); null: outside any"),
        _c("contig", _S, "reference sequence name"),
        _c("pool", _S, "primer pool (BED column 5)"),
        _c("pos", _I64, "1-based first base of the insert (after the LEFT primer)"),
        _c("end_pos", _I64, "1-based last base of the insert (before the RIGHT primer)"),
        _c("reads", _I64, "primary alignments whose 5' end a primer of this amplicon clipped", False),
        _c("misprimed_reads", _I64, "of those, alignments whose other end another amplicon's primer clipped",
           False),
        _c("mean_pileup_depth", _F64, "mean mpileup depth (every base and deletion, overlapping mates both "
           "counted) over the insert"),
        _c("min_pileup_depth", _I64, "lowest mpileup depth over the insert"),
        _c("dropout", _B, "the amplicon dropped out: no read of its own (its primers clipped none), or a mean "
           "pileup depth below 20x; null for the row of reads outside any amplicon"),
    ),
    key=("sample", "amplicon"),
)

SAMPLES = Table(
    "samples",
    "One row per run, sample and samplesheet row (a lane): its files and metadata. Several rows of one "
    "sample are processed as one sample.",
    (
        _SAMPLE,
        _c("fastq_1", _S, "the row's read 1 (or single-end) file URI", False),
        _c("fastq_2", _S, "the row's read 2 file URI; null for single-end"),
        _c("control", _B, "the samplesheet's `control` (true / false; null when absent or empty)"),
        _c("run_name", _S, "the samplesheet's `run_name`, else the run number in the Illumina read names"),
        _c("lane", _S, "the samplesheet's `lane`, else the lane in the Illumina read names"),
        _c("instrument", _S, "instrument ID from the Illumina read names"),
        _c("flowcell", _S, "flowcell ID from the Illumina read names (CASAVA 1.8+ names only)"),
        _c("metadata", _S, "JSON object of the row's other samplesheet columns (strings); null without any"),
    ),
)

RUNS = Table(
    "runs",
    "One row per run (and per input the start function rejected): inputs, parameters, software version, "
    "state, timings, shards, cost estimate.",
    (
        _c("state", _S, f"{', '.join(s.value for s in FINAL_STATES[:-1])} or {FINAL_STATES[-1].value} (refused by "
                        "the start function: no execution ran)", False),
        _c("samples", _S, "comma-separated sample names"),
        _c("inputs", _S, "JSON list of the input objects as the run saw them: {uri, bucket, key, etag, size} "
           "(FASTQ files and the samplesheet; which file is which mate of which sample is in the samples table)"),
        _c("parameters", _S, "JSON object of the run's parameters (trimming, reference, shards)"),
        _c("reference", _S, "reference URI, or null"),
        _c("software_version", _S, "seqlake version"),
        _c("cutadapt_version", _S, "version of cutadapt (the trimming library)"),
        _c("mappy_version", _S, "version of mappy, minimap2's Python binding (the same version as minimap2's); "
           "null without a reference"),
        _c("reference_md5", _S, "JSON object: each reference contig's MD5 as SAM @SQ M5 (of the uppercase "
           "sequence); null without a reference"),
        _c("started_at", _TS, "when the run started (REJECTED: when the rejected object was uploaded)"),
        _c("finished_at", _TS, "when the run was committed, failed or rejected"),
        _c("duration_s", _F64, "wall-clock seconds"),
        _c("shards", _I32, "number of shards (Batch array size)"),
        _c("retried_shards", _I32, "shards that needed more than one attempt"),
        _c("failed_shard", _I32, "the shard that failed the run, if any"),
        _c("reason", _S, "why the run failed or was rejected (file, line or record, problem); null when it "
                         "succeeded"),
        _c("reads", _I64, "raw reads over all samples and mates"),
        _c("bases", _I64, "raw bases over all samples and mates"),
        _c("cost_estimate_usd", _F64, "compute cost estimate: the shard jobs' vCPU-seconds at the Spot price "
                                       "(docs/COST.md)"),
        _c("report_uri", _S, "the run's QC report (reports/<run_id>/index.html); null when it failed to render "
                             "(status.json says why) or the input was rejected"),
    ),
)

TABLES: tuple[Table, ...] = (SAMPLE_SUMMARY, QC_SUMMARY, QC_POSITION, LENGTH_HIST, QUALITY_HIST, ALIGNMENTS,
                             COVERAGE, CONTIG_COVERAGE, LOW_COVERAGE, ALIGNMENT_HIST, VARIANTS, CONSENSUS,
                             AMPLICON_DEPTH, SAMPLES, RUNS)
BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
#: columns that differ between two commits of the same data (everything else is a function of the inputs)
COMMIT_TIME_COLUMNS: tuple[str, ...] = ("committed_at",)
#: the tables only amplicon mode (a run with a ``primer_bed``) fills; other runs get an empty partition
AMPLICON_TABLES: tuple[str, ...] = ("amplicon_depth",)
#: the tables a failed run never gets a partition in (``runs`` records the failure itself)
RESULT_TABLES: tuple[str, ...] = tuple(t.name for t in TABLES if t.name != "runs")
#: the Iceberg tables (format version 2, seqlake.lake.iceberg): every result table
ICEBERG_TABLES: frozenset[str] = frozenset(RESULT_TABLES)
#: Iceberg's table format version of every Iceberg table here
ICEBERG_FORMAT_VERSION = 2
#: the tables with a ``<table>_latest`` view: each sample's rows from its newest committed run (the run whose
#: ``sample_summary`` row has the latest ``committed_at``), older runs kept in the table for history
LATEST_TABLES: tuple[str, ...] = ("sample_summary", "qc_summary", "variants", "consensus", "amplicon_depth")


#: the key of every per-position staging table (docs/INTERNALS.md, "Per-position data"): the sample and the
#: contig dictionary-encoded (a child's few samples, a region's contigs), then a 0-based position column
#: (``pos``, or ``start`` with an exclusive ``stop`` for runs and intervals); rows sorted by that key
STAGING_STRING = pa.dictionary(pa.int32(), pa.string())
STAGING_SAMPLE = _c("sample", STAGING_STRING, "sample name", False)
STAGING_CONTIG = _c("contig", STAGING_STRING, "reference sequence name", False)
#: the position columns a staging table may have, in the order they are looked for
POSITION_COLUMNS: tuple[str, ...] = ("pos", "start")
#: a staging table with this column holds intervals ``[start, stop)``: a region gets the part inside it
INTERVAL_END = "stop"

COVERAGE_BINS = Table(
    "coverage_bins",
    "Staging only: a child's non-zero depth bins per sample and contig (the reducers add them up).",
    (
        STAGING_SAMPLE, STAGING_CONTIG,
        _c("pos", _I64, "0-based first base of the bin (a multiple of the run's coverage bin width)", False),
        _c("depth_sum", _I64, "sum of per-base span depth over the bin", False),
    ),
    key=("sample", "contig", "pos"),
)

COVERED_INTERVALS = Table(
    "covered_intervals",
    "Staging only: the union of a child's alignment spans per sample and contig (the reducers union them).",
    (
        STAGING_SAMPLE, STAGING_CONTIG,
        _c("start", _I64, "0-based start", False),
        _c(INTERVAL_END, _I64, "0-based exclusive end", False),
    ),
    key=("sample", "contig", "start"),
)

DEPTH_RUNS = Table(
    "depth_runs",
    f"Staging only: a child's exact depth per sample and contig as runs of constant depth, capped at "
    f"{DEPTH_CAP} (the reducers sum them; see seqlake.lake.depth).",
    (
        STAGING_SAMPLE, STAGING_CONTIG,
        _c("start", _I64, "0-based start", False),
        _c(INTERVAL_END, _I64, "0-based exclusive end", False),
        _c("depth", _I32, "depth over the run (>= 1)", False),
    ),
    key=("sample", "contig", "start"),
)



def position_column(table: Table) -> str:
    """The 0-based position column of a staging table (its key's third column)."""
    names = [c.name for c in table.columns]
    return next(c for c in POSITION_COLUMNS if c in names)


COVERAGE_POINTS = Table(
    "coverage_points",
    "Not cataloged: each sample's depth over its longest contigs summed into at most about 2,000 points (what "
    "the report draws instead of reading the whole coverage table; written by the commit from the reducers' "
    "summaries, runs/<id>/reduce/coverage_points.parquet).",
    (
        _SAMPLE,
        _c("contig", _S, "reference sequence name", False),
        _c("bin_start", _I64, "0-based start of the point's bases", False),
        _c("bin_end", _I64, "exclusive end of the point's bases", False),
        _c("depth_sum", _I64, "sum of per-base depth over them (as the coverage table's)", False),
    ),
    key=("sample", "contig", "bin_start"),
)

#: the bases of the allele counts, in column order (anything but A, C, G, T is counted as N)
ALLELE_BASES: tuple[str, ...] = ("a", "c", "g", "t", "n")
_ENTRIES = (*ALLELE_BASES, "del")


def _entry_doc(b: str) -> str:
    return "deleted reference bases (mpileup `*`)" if b == "del" else f"{b.upper()} bases"


#: the count columns of ``alleles`` (all integers, added up exactly across children)
ALLELE_COUNT_COLUMNS: tuple[Column, ...] = (
    *(_c(f"{b}_{s}", _I32, f"{_entry_doc(b)} on the {'forward' if s == 'fwd' else 'reverse'} strand at base "
         "quality >= the run's min_base_quality (a deletion has the quality of the read base after it)", False)
      for b in _ENTRIES for s in ("fwd", "rev")),
    *(_c(f"{b}_all", _I32, f"{_entry_doc(b)} at any quality (their sum is samtools mpileup's depth, column 4)",
         False) for b in _ENTRIES),
    *(_c(f"{b}_qual", _I64, f"sum of the Phred qualities of the {b.upper()} bases counted in {b}_fwd + {b}_rev",
         False) for b in ALLELE_BASES),
    *(_c(f"{b}_olap", _I32, f"{_entry_doc(b)} at base quality >= min_base_quality after htslib's overlapping-"
         "mates rule (mpileup without -x: the consensus pileup)", False) for b in _ENTRIES),
    _c("read_starts", _I32, "alignments whose first aligned base is here", False),
    _c("read_ends", _I32, "alignments whose last aligned base is here", False),
    _c("read_ends_olap", _I32, "alignments whose last aligned base is here and passes min_base_quality after "
       "the overlapping-mates rule (ivar consensus' insertion denominator)", False),
)

ALLELES = Table(
    "alleles",
    "Staging only: a child's allele counts per sample, contig and 0-based position (samtools mpileup -A -B "
    "-d 0 -Q 0 entries; see seqlake.lake.pileup); rows only where a read has a base or a deletion.",
    (STAGING_SAMPLE, STAGING_CONTIG, _c("pos", _I64, "0-based position", False), *ALLELE_COUNT_COLUMNS),
    key=("sample", "contig", "pos"),
)

INDELS = Table(
    "indels",
    "Staging only: a child's indel alleles per sample, contig and 0-based anchor position (the reference base "
    "before the indel, as mpileup anchors them), counted whatever their quality.",
    (
        STAGING_SAMPLE, STAGING_CONTIG,
        _c("pos", _I64, "0-based anchor position", False),
        _c("deleted", _I32, "deleted reference bases (0 for an insertion)", False),
        _c("inserted", _S, "inserted bases, reference strand, upper case (empty for a deletion)", False),
        _c("fwd", _I32, "supporting alignments on the forward strand", False),
        _c("rev", _I32, "supporting alignments on the reverse strand", False),
    ),
    key=("sample", "contig", "pos", "deleted", "inserted"),
)

AMPLICON_READS = Table(
    "amplicon_reads",
    "Staging only (amplicon mode): a child's primary alignments per sample and amplicon of the primer that "
    "clipped their 5' end, on the amplicon's contig at its insert's first base (so the region holding that "
    "base counts them); the alignments no primer clipped on one row per contig, at its position 0.",
    (
        STAGING_SAMPLE, STAGING_CONTIG,
        _c("pos", _I64, "0-based first base of the amplicon's insert (0: the contig's row of reads outside any "
           "amplicon)", False),
        _c("amplicon", _S, "amplicon name (the primer names before _LEFT / _RIGHT); empty: outside any", False),
        _c("reads", _I64, "primary alignments", False),
        _c("misprimed_reads", _I64, "of those, alignments whose other end was clipped by another amplicon's "
           "primer", False),
    ),
    key=("sample", "contig", "pos", "amplicon"),
)

#: what a child writes for the reducers only: never cataloged, never queried
STAGING_TABLES: tuple[Table, ...] = (COVERAGE_BINS, COVERED_INTERVALS, DEPTH_RUNS, ALLELES, INDELS,
                                     AMPLICON_READS)
#: the staging tables of depth and coverage (lake.staging.staging_tables), and of allele counts
COVERAGE_STAGING: tuple[Table, ...] = (COVERAGE_BINS, COVERED_INTERVALS, DEPTH_RUNS)
ALLELE_STAGING: tuple[Table, ...] = (ALLELES, INDELS, AMPLICON_READS)
#: the staging tables that travel by region in a child's positions object to the reducers
#: (seqlake.lake.positions, seqlake.reduce.reducer): every one of them
POSITION_STAGING: tuple[Table, ...] = COVERAGE_STAGING + ALLELE_STAGING
STAGING_BY_NAME: dict[str, Table] = {t.name: t for t in POSITION_STAGING}


COORDINATES = (
    "Coordinates: `pos` and `end_pos` are 1-based and inclusive in every table (`alignments`, `low_coverage`, "
    "`coverage`), as SAM, IGV and samtools regions (`contig:pos-end_pos`) write them. `coverage` also keeps "
    "`bin_start` (0-based, BED) for joins with BED files; `bin_end` is the same number in both conventions."
)
PERCENTAGES = (
    "Names say their unit, and one name means one thing in every table. Percentages are named `pct_*` and run "
    "from 0 to 100; a fraction (0 to 1) would be named `*_fraction` (none is used); no other name says rate or "
    "ratio. Counts say what they count: `reads` counts every read of every mate (a pair is two reads), names "
    "with `pairs` count pairs. `mean_depth` is `samtools depth -a`'s (aligned bases: a deletion is not "
    "covered); `mean_span_depth` and `pct_span_breadth` count whole alignment spans (deletions covered, as "
    f"mosdepth --fast-mode). Depth thresholds are {', '.join(f'{t}x' for t in THRESHOLDS)}."
)


VARIANT_NAMES = """## `variants` in other tools' names

| seqlake `variants` | ivar 1.3.1 TSV | nf-core/viralrecon long table | Glow VCF schema |
|---|---|---|---|
| `contig` | REGION | CHROM | `contigName` |
| `pos` | POS | POS | `start` + 1 |
| `ref` | REF (a deletion: REF + the deleted bases) | REF | `referenceAllele` |
| `alt` | ALT (`+BASES`: REF + BASES; `-BASES`: REF) | ALT | `alternateAlleles[0]` |
| `depth` | TOTAL_DP | DP | `INFO_DP`, `genotypes.DP` |
| `ref_count`, `alt_count` | REF_DP, ALT_DP | REF_DP, ALT_DP | `genotypes.AD` |
| `alt_fraction` | ALT_FREQ | AF | `genotypes.AF` |
| `ref_rev`, `alt_rev`, `ref_qual`, `alt_qual`, `pval` | REF_RV, ALT_RV, REF_QUAL, ALT_QUAL, PVAL | - | FORMAT |
| `filters`, `pass` | PASS (TRUE/FALSE) at `-t variant_freq` | FILTER | `filters` |
| `gene`, `ref_codon`, `ref_aa`, `alt_codon`, `alt_aa` | GFF_FEATURE, REF_CODON, REF_AA, ALT_CODON, ALT_AA | - | - |
| `aa_change` | - | HGVS_P_1LETTER (snpEff's, `p.Asn501Tyr` style) | - |

The per-sample VCF (`results/genomes/run_id=<id>/<sample>.vcf.gz`, with its `.tbi`) holds the same rows;
the consensus FASTA is beside it (`<sample>.consensus.fasta`).

## Each sample's BAM (or CRAM)

Beside them, `<sample>.bam` with its index: the sample's alignments, coordinate-sorted (`@HD SO:coordinate`,
as `samtools sort` orders them), the bases and qualities of the trimmed reads, `NM` and the read group (`RG`)
on every record; `@SQ` lines with each contig's `M5`, an `@RG` per lane of the sample (`ID`
`<sample>.<flowcell>.<lane>`, `SM`, `LB` the samplesheet's `library` column else the sample, `PL`, `PU`
`<flowcell>.<lane>`; the lane from the samplesheet's `lane` column, else from the Illumina read names; `ID` the
sample alone when no lane is known), `@PG` lines for minimap2 (mappy's version) and seqlake. The index is
`<sample>.bam.bai` unless a contig of the reference is over 2^29 bases (512 Mb, more than a `.bai` can bin):
then `<sample>.bam.csi` (min_shift 14, as many levels as the longest contig needs, as `samtools index -c`).
The records are the `alignments` table's rows (primary, supplementary as soft-clipped, unmapped reads: placed
at their mate's position, or at the end of the file when both are unmapped); in amplicon mode they are
primer-clipped (soft clips, as viralrecon's trimmed BAM) where the table keeps the unclipped rows. Duplicates
are not marked. Open it in IGV, or query a region with `samtools view <sample>.bam chr:1-1000`.

With `--cram` (`"cram": true` in a params.json), `<sample>.cram` and `<sample>.cram.crai` instead: the same
header and records as CRAM 3.0, about half to two thirds the BAM's bytes (the MiSeq pair: 0.54x; the demo
reads: 0.66x), beside the run's reference, `reference.fasta` and `reference.fasta.fai` in the same folder. A
CRAM stores each read's bases as their differences from the reference, so it is readable only with that
reference: seqlake keeps it there, a copy of the bases the run aligned to (the FASTA it was given may change or
go; the CRAM's `@SQ M5` names each contig's), for as long as the run's results are kept. Read it with
`samtools view -T reference.fasta <sample>.cram chr:1-1000` (IGV: load `reference.fasta` as the genome), or
put the reference where htslib looks contigs up by their MD5 (`seq_cache_populate.pl -root DIR
reference.fasta`, then `REF_PATH=DIR/%2s/%2s/%s`). samtools adds an `MD` tag to each record it decodes from a
CRAM (its default; `--input-fmt-option decode_md=0` leaves it out, and then also the `NM` that htslib dropped
where the bases give it back); the records are otherwise the BAM's, every field and tag.
"""


VERDICT = """## The QC verdict

`sample_summary.qc_status` is `pass`, `warn` or `fail`, and `qc_reasons` says why (seqlake.lake.verdict). The
checks, their run parameters and defaults (after ncov-tools' summary flags, as ARTIC / nf-core/viralrecon labs
read them):

- genome completeness, `consensus.pct_called` over all contigs: fails below `qc_fail_called_pct` (50 %), warns
  below `qc_warn_called_pct` (90 %) (ncov-tools INCOMPLETE_GENOME, PARTIAL_GENOME);
- frameshifts: PASS indels not a multiple of 3 long, in a CDS of the GFF (anywhere without one): warn
  (POSSIBLE_FRAMESHIFT_INDELS);
- ambiguity: more than `qc_max_ambiguous` (5) IUPAC codes in the consensus: warn (EXCESS_AMBIGUITY);
- mixed sample: `qc_mixed_alleles` (10) or more SNV alleles at a frequency in [`qc_mixed_min_fraction`,
  `qc_mixed_max_fraction`] (0.05-0.95) where the depth is at least `qc_mixed_min_depth` (50) and ivar's Fisher
  test passes: warn (POSSIBLE_MIXTURE);
- negative control (`control_type` negative): more than `qc_negative_max_pct_10x` (1.0 %) of the genome at
  >= 10x fails (contamination; ncov-tools' negative control report).
A negative control is held to its own check only (it should have no genome). The thresholds of the mixture
and negative-control checks are seqlake's: ncov-tools' mixture report compares samples, and its negative
control report gives the covered fraction without a cut.
"""
ICEBERG_NOTE = (
    "Every result table is an Apache Iceberg table (format version 2) in the Glue catalog, partitioned by "
    "`run_id` (a column of type string: the Iceberg partition, projected from the manifests into the files the "
    "commit added as they were written). Each run is one Iceberg commit per table (its snapshot's summary "
    "names the run: `seqlake.run-id`), so a table's history is its runs: query one as of a snapshot with "
    "Athena's `FOR VERSION AS OF <snapshot id>` (the ids and their runs are in the metadata table "
    "`\"<table>$snapshots\"`), locally `seqlake local query --as-of-run RUN_ID`. "
    "`runs` is a Hive table, one `run_id` partition per run (every step writes its row, a rejected upload's "
    "too). Each sample's rows of its newest committed run are the views `<table>_latest` ("
    + ", ".join(f"`{t}_latest`" for t in LATEST_TABLES)
    + "): the same columns, older runs kept in the tables for history; the named queries read them where a lab "
    "means \"now\"."
)


def markdown() -> str:
    """The table reference for docs/TABLES.md."""
    out = ["# Tables", "", "Generated by `python -m seqlake.lake.tables --markdown` from `src/seqlake/lake/tables.py`.",
           "", ICEBERG_NOTE, "", COORDINATES, "", PERCENTAGES, ""]
    for t in TABLES:
        out += [f"## `{t.name}`", "", t.doc, "", "| column | type | description |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.iceberg_glue_type if t.is_iceberg else c.glue_type} | {c.doc} |"
                for c in t.columns]
        out.append("")
    out.append(VARIANT_NAMES)
    out.append(VERDICT)
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--markdown", action="store_true", help="print the table reference")
    args = parser.parse_args()
    if args.markdown:
        print(markdown())


if __name__ == "__main__":
    main()
