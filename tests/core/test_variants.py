"""Allele counts, variants and consensus against ivar 1.3.1 over samtools 1.16.1 mpileup of the same reads
aligned by the minimap2 2.24 command line (nf-core/viralrecon's commands), on the real MiSeq pair and on a
simulated amplicon library with known mutations; shard invariance; the pieces (Fisher's test, the
overlapping-mates hash, consensus rules, BGZF + tabix)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqlake.base.errors import BadInputError
from seqlake.base.layout import CONSENSUS_SUFFIX, VCF_SUFFIX
from seqlake.base.model import Sample
from seqlake.base.params import Params
from seqlake.child import worker
from seqlake.child.trim import Trimmer
from seqlake.commit import merge
from seqlake.demo_data.simulate import Reference, SimConfig, format_fastq, read_reference, simulate_chunk
from seqlake.lake.alleles import CallParams, Indel, consensus_segment, fisher_left, ivar_pvalue
from seqlake.lake.pileup import x31_wang_parity
from seqlake.lake.regions import load_reduce_plan, windows
from seqlake.lake.slices import SliceLayout, child_samples, read_region_entries
from seqlake.lake.vcf import bgzf_compress, tabix_index
from seqlake.plan.gff import parse_gff
from seqlake.plan.planfile import Plan
from seqlake.plan.planner import make_plan
from seqlake.plan.refindex import indexed_reference
from seqlake.reads.chunks import parse_chunk
from seqlake.reads.fastq import iter_file_chunks
from seqlake.reduce.record_counts import sample_records, window_allele_tables, window_reads

TESTS = Path(__file__).resolve().parents[1]
PRIMER_BED = TESTS / "data" / "nCoV-2019.V3.primer.bed"
CONTIG = "MN908947.3"


@pytest.fixture(autouse=True)
def _ref_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEQLAKE_REF_CACHE", str(tmp_path_factory.getbasetemp() / "refcache"))


@pytest.fixture(scope="module")
def tools() -> dict[str, str]:
    found = {t: shutil.which(t) for t in ("minimap2", "samtools", "ivar")}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (make tools installs them with apt-get)")
    return {t: str(p) for t, p in found.items()}


# ------------------------------------------------------------------------------------------ helpers
def trim_pairs(r1: Path, r2: Path, out: Path, params: Params) -> tuple[Path, Path]:
    """The pairs seqlake's trimming keeps, trimmed, as FASTQ: the reads both sides of a comparison see."""
    trimmer = Trimmer(params)
    paths = (out / "trimmed_R1.fastq", out / "trimmed_R2.fastq")
    with paths[0].open("wb") as o1, paths[1].open("wb") as o2:
        first = 0
        for c1, c2 in zip(iter_file_chunks(str(r1)), iter_file_chunks(str(r2)), strict=True):
            recs = [parse_chunk(c1, str(r1), first), parse_chunk(c2, str(r2), first)]
            trims = [trimmer.trim_mate(r.sequences(), r.qualities()) for r in recs]
            keep = trimmer.filter(trims)
            for rec, t, o in zip(recs, trims, (o1, o2), strict=True):
                names, quals = rec.names(), rec.qualities()
                o.write("".join(f"@{names[i]}\n{t.sequences[i]}\n+\n{quals[i][t.start[i]:t.stop[i]]}\n"
                                for i in np.flatnonzero(keep).tolist()).encode())
            first += len(recs[0])
    return paths


def drop_pairs(paths: tuple[Path, Path], names: set[str], out: Path) -> tuple[Path, Path]:
    """The pairs whose name is not in ``names``."""
    kept = []
    for k, p in enumerate(paths):
        lines = p.read_text().splitlines(keepends=True)
        dest = out / f"kept_R{k + 1}.fastq"
        dest.write_text("".join("".join(lines[i : i + 4]) for i in range(0, len(lines), 4)
                                if lines[i][1:].split()[0] not in names))
        kept.append(dest)
    return kept[0], kept[1]


@dataclass
class Oracle:
    variants: dict[tuple[int, str], tuple[Any, ...]]
    consensus: str
    #: (read name, mate) -> its alignment rows (flag, pos, CIGAR with hard clips as soft clips)
    alignments: dict[tuple[str, int], list[tuple[int, int, str]]]
    #: with a GFF (ivar variants -g): (POS, ALT) -> GFF_FEATURE, REF_CODON, REF_AA, ALT_CODON, ALT_AA, each
    #: ivar row's values (a row per CDS) joined with "," as seqlake joins them; None for NA
    annotations: dict[tuple[int, str], tuple[str | None, ...]] = field(default_factory=dict)


def ivar_oracle(tools: dict[str, str], reads: tuple[Path, Path], ref: Path, out: Path, params: Params) -> Oracle:
    """``minimap2 -ax sr | samtools sort`` (then, in amplicon mode, ``samtools ampliconclip --both-ends
    --strand`` and a sort), then nf-core/viralrecon's mpileup + ivar commands."""
    bam = out / "oracle.bam"
    sam = subprocess.run([tools["minimap2"], "-t", "1", "-ax", "sr", str(ref), *map(str, reads)],
                         capture_output=True, text=True, check=True).stdout
    subprocess.run([tools["samtools"], "sort", "-o", str(bam), "-"], input=sam.encode(), check=True,
                   capture_output=True)
    if params.primer_bed is not None:
        clipped = subprocess.run([tools["samtools"], "ampliconclip", "--both-ends", "--strand", "--no-PG", "-b",
                                  params.primer_bed, str(bam)], capture_output=True, check=True).stdout
        subprocess.run([tools["samtools"], "sort", "-o", str(bam), "-"], input=clipped, check=True,
                       capture_output=True)
    alignments: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for line in sam.splitlines():
        if line.startswith("@"):
            continue
        f = line.split("\t")
        flag = int(f[1])
        alignments.setdefault((f[0], 2 if flag & 0x80 else 1), []).append(
            pileup_view(flag, int(f[3]), f[5].replace("H", "S")))
    pileup = [tools["samtools"], "mpileup", "-aa", "-A", "-B", "-d", "0", "-Q", "0", "-f", str(ref), str(bam)]
    var_plup = subprocess.run([*pileup[:2], "-x", *pileup[2:]], capture_output=True, check=True).stdout
    subprocess.run([tools["ivar"], "variants", "-p", str(out / "ivar"), "-t", str(params.variant_report_freq),
                    "-q", str(params.min_base_quality), "-m", str(params.variant_min_depth), "-r", str(ref),
                    *(["-g", params.gff] if params.gff else [])],
                   input=var_plup, check=True, capture_output=True)
    cons_plup = subprocess.run(pileup, capture_output=True, check=True).stdout
    subprocess.run([tools["ivar"], "consensus", "-p", str(out / "cons"), "-t", str(params.consensus_freq),
                    "-q", str(params.min_base_quality), "-m", str(params.consensus_min_depth), "-n", "N"],
                   input=cons_plup, check=True, capture_output=True)
    variants = {}
    features: dict[tuple[int, str], list[list[str]]] = {}
    for line in (out / "ivar.tsv").read_text().splitlines()[1:]:
        f = line.split("\t")
        if len(f) > 14:  # -g: a row per CDS holding the allele, the same numbers on each
            features.setdefault((int(f[1]), f[3]), []).append(f[14:19])
        # allele, depth, counts, frequency (and the qualities and p-value, which match too)
        variants[(int(f[1]), f[3])] = (int(f[4]), int(f[5]), int(f[7]), int(f[8]), int(f[11]), f[10], int(f[6]),
                                       int(f[9]), f[12], f[13] == "TRUE")
    consensus = "".join((out / "cons.fa").read_text().split("\n")[1:])
    annotations = {k: tuple(None if rows == [["NA"] * 5] else ",".join(col) for col in zip(*rows, strict=True))
                   for k, rows in features.items()}
    return Oracle(variants, consensus, alignments, annotations)


def run_seqlake(reads: tuple[Path, Path], ref: Path, out: Path, shards: int = 1,
                params: Params | None = None) -> Plan:
    params = params or Params(trim=False)
    plan = make_plan("run", [Sample("s", str(reads[0]), str(reads[1]))], out_prefix=str(out),
                     reference=indexed_reference(str(ref), params.preset),
                     shards=shards, params=params)
    for child in range(plan.array_size):
        worker.process_child(plan, child)
    merge.merge_run(plan)
    return plan


def ivar_key(row: dict[str, Any]) -> tuple[int, str]:
    """A ``variants`` row's (POS, ALT) as ivar writes them (+BASES / -BASES for indels)."""
    kind, ref, alt = row["type"], row["ref"], row["alt"]
    return row["pos"], alt if kind == "snv" else ("+" + alt[1:] if kind == "ins" else "-" + ref[1:])


def seqlake_variants(plan: Plan) -> dict[tuple[int, str], tuple[Any, ...]]:
    rows = pq.read_table(plan.layout.partition("variants")).to_pylist()
    return {ivar_key(r): (r["ref_count"], r["ref_rev"], r["alt_count"], r["alt_rev"], r["depth"],
                          f"{r['alt_fraction']:.6g}", r["ref_qual"], r["alt_qual"], f"{r['pval']:.6g}",
                          "pv" not in r["filters"]) for r in rows}


def seqlake_consensus(plan: Plan) -> str:
    text = Path(plan.layout.sample_file("s", CONSENSUS_SUFFIX)).read_text()
    return "".join(text.split("\n")[1:])


def pileup_view(flag: int, pos: int, cigar: str) -> tuple[int, int, str]:
    """What mpileup reads of an alignment row: nothing of an unmapped one (minimap2 gives it its mate's
    position, mappy none), and 0x2 only on primary rows (the overlap rule; minimap2 sets it on no
    supplementary row, mappy on those of a proper pair: neither is read there)."""
    if flag & 0x4:
        return flag & 0x4, 0, "*"
    return (flag & ~0x2 if flag & 0x800 else flag) & ~0x28, pos, cigar


def differing_reads(plan: Plan, oracle: Oracle) -> set[str]:
    """Read names whose mappy alignments (the ``alignments`` table) differ from minimap2's."""
    rows = pq.read_table(plan.layout.partition("alignments"), columns=["read_name", "mate", "flag", "pos", "cigar"])
    mine: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for r in rows.to_pylist():
        view = pileup_view(r["flag"], r["pos"] or 0, r["cigar"] or "*")
        mine.setdefault((r["read_name"], r["mate"]), []).append(view)
    keys = set(mine) | set(oracle.alignments)
    return {k[0] for k in keys if sorted(mine.get(k, [])) != sorted(oracle.alignments.get(k, []))}


def compare_with_ivar(tools: dict[str, str], reads: tuple[Path, Path], ref: Path, tmp: Path,
                      params: Params) -> tuple[Plan, Oracle, set[str]]:
    """seqlake and the oracle over the same trimmed reads, without the reads the aligners place differently."""
    trimmed = trim_pairs(*reads, tmp, params)
    untrimmed = replace(params, trim=False)  # the reads are trimmed already
    first = run_seqlake(trimmed, ref, tmp / "first", params=untrimmed)
    oracle = ivar_oracle(tools, trimmed, ref, tmp, params)
    differ = differing_reads(first, oracle)
    if not differ:
        return first, oracle, differ
    kept = drop_pairs(trimmed, differ, tmp)
    return run_seqlake(kept, ref, tmp / "kept", params=untrimmed), ivar_oracle(tools, kept, ref, tmp, params), differ


# ------------------------------------------------------------------------------------ the real pair
def test_miseq_variants_and_consensus_equal_ivar(miseq: tuple[Path, Path], reference: Path, tools: dict[str, str],
                                                 tmp_path: Path) -> None:
    plan, oracle, differ = compare_with_ivar(tools, miseq, reference, tmp_path, Params())
    # mappy 2.31 and minimap2 2.24 place these reads differently; they are left out of both sides
    assert len(differ) < 20, sorted(differ)
    mine = seqlake_variants(plan)
    assert len(oracle.variants) > 40
    assert mine == oracle.variants
    assert seqlake_consensus(plan) == oracle.consensus


def test_miseq_with_the_artic_primers_equals_ampliconclip_then_ivar(miseq: tuple[Path, Path], reference: Path,
                                                                    tools: dict[str, str], tmp_path: Path) -> None:
    params = Params(primer_bed=str(PRIMER_BED))
    plan, oracle, differ = compare_with_ivar(tools, miseq, reference, tmp_path, params)
    assert len(differ) < 20, sorted(differ)
    assert seqlake_variants(plan) == oracle.variants
    assert seqlake_consensus(plan) == oracle.consensus
    amplicons = pq.read_table(plan.layout.partition("amplicon_depth")).to_pylist()
    assert len(amplicons) == 98 + 1  # ARTIC V3's amplicons and the row of reads outside any
    primary = pq.read_table(plan.layout.partition("alignments"), columns=["flag"]).column("flag").to_numpy()
    mapped_primary = int((((primary & 0x4) == 0) & ((primary & 0x900) == 0)).sum())
    assert sum(a["reads"] for a in amplicons) == mapped_primary
    covered = [a for a in amplicons if a["amplicon"] and a["mean_pileup_depth"] >= 10]
    assert 0 < len(covered) < 98  # a thin library: some amplicons dropped out


def test_amplicon_mode_coverage_is_samtools_depth_over_ampliconclip(miseq: tuple[Path, Path], reference: Path,
                                                                     tools: dict[str, str], tmp_path: Path) -> None:
    """In amplicon mode pct_genome_* and low_coverage count the primer-clipped reads: equal to ``samtools depth
    -a`` over ``samtools ampliconclip --both-ends --strand`` of the same reads (the oracle's BAM); and every
    amplicon without a read of its own is a dropout, however deep its neighbours' overlaps make it."""
    params = Params(primer_bed=str(PRIMER_BED))
    plan, _, differ = compare_with_ivar(tools, miseq, reference, tmp_path, params)
    assert len(differ) < 20, sorted(differ)
    depth = subprocess.run([tools["samtools"], "depth", "-a", str(tmp_path / "oracle.bam")], capture_output=True,
                           text=True, check=True).stdout
    per_base = np.array([int(line.split("\t")[2]) for line in depth.splitlines()])
    assert len(per_base) == 29903
    summary = pq.read_table(plan.layout.partition("sample_summary")).to_pylist()[0]
    for t in (1, 10, 20, 30):
        assert summary[f"pct_genome_{t}x"] == pytest.approx(100 * np.count_nonzero(per_base >= t) / 29903), t
    low = pq.read_table(plan.layout.partition("low_coverage")).to_pylist()
    below = per_base < 10
    edges = np.flatnonzero(np.diff(np.concatenate([[0], below.astype(np.int8), [0]])))
    want = [(int(a) + 1, int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    assert sorted((r["pos"], r["end_pos"]) for r in low if r["threshold"] == 10) == want
    amplicons = pq.read_table(plan.layout.partition("amplicon_depth")).to_pylist()
    silent = [a for a in amplicons if a["amplicon"] and a["reads"] == 0]
    assert silent and all(a["dropout"] for a in silent)
    assert any(a["mean_pileup_depth"] >= 20 for a in silent)  # the neighbours' overlaps alone reach 20x


BED_LINES = ["MN908947.3\t30\t54\tnCoV-2019_1_LEFT\t1\t+", "MN908947.3\t385\t410\tnCoV-2019_1_RIGHT\t1\t-"]


@pytest.mark.parametrize(("lines", "line", "message"), [
    (["MN908947.3\t30\t24\tnCoV-2019_1_LEFT\t1\t+", BED_LINES[1]], 1, "end 24 is not after its start 30"),
    ([*BED_LINES, "MN908947.3\t40\t60\tnCoV-2019_1_LEFT\t1\t+"], 3, "duplicate primer name nCoV-2019_1_LEFT"),
    ([BED_LINES[0], "MN908947.3\t29900\t29930\tnCoV-2019_1_RIGHT\t1\t-"], 2, "past the end of MN908947.3"),
    (["chr1\t30\t54\tnCoV-2019_1_LEFT\t1\t+", BED_LINES[1]], 1, "contig 'chr1' is not in the reference"),
    (["MN908947.3 30 54 nCoV-2019_1_LEFT 1 +", BED_LINES[1]], 1, "not a tab-separated primer BED line"),
    ([*BED_LINES, "MN908947.3\t320\t342\tnCoV-2019_2_LEFT\t2\t+"], 3, "amplicon nCoV-2019_2: a LEFT primer and no "
                                                                          "RIGHT primer"),
])
def test_a_bad_primer_bed_is_rejected_before_anything_is_written(lines: list[str], line: int, message: str,
                                                                  reference: Path, tmp_path: Path) -> None:
    bed = tmp_path / "primers.bed"
    bed.write_text("\n".join(lines) + "\n")
    reads = tmp_path / "r.fastq"
    reads.write_text("@r1\nACGT\n+\nIIII\n")
    with pytest.raises(BadInputError) as caught:
        make_plan("bad", [Sample("s", str(reads))], out_prefix=str(tmp_path / "lake"),
                  reference=indexed_reference(str(reference)),
                  params=Params(primer_bed=str(bed)))
    assert str(caught.value).startswith(f"{bed}:{line}: ") and message in str(caught.value)
    assert not (tmp_path / "lake").exists()


# ------------------------------------------------------------------------- a simulated amplicon library
@dataclass(frozen=True)
class Mutation:
    pos: int  # 0-based; for indels the anchor (the base before)
    ref: str  # VCF style
    alt: str
    haplotypes: frozenset[int]


#: haplotype weights: a mutation's frequency is the sum of the weights of the haplotypes carrying it
WEIGHTS = (0.45, 0.30, 0.15, 0.10)
#: the haplotype sets mutations are drawn from (frequencies 1, 0.75, 0.45, 0.55, 0.3, 0.15, 0.1, 0.25)
GROUPS = ((0, 1, 2, 3), (0, 1), (0,), (0, 3), (1,), (2,), (3,), (2, 3))


def amplicons(bed: Path, first: int, last: int) -> list[tuple[int, int, int, int]]:
    """(left primer start, left primer end, right primer start, right primer end) of amplicons first..last."""
    spans: dict[int, dict[str, tuple[int, int]]] = {}
    for line in bed.read_text().splitlines():
        f = line.split("\t")
        number = int(f[3].split("_")[1])
        side = "LEFT" if "_LEFT" in f[3] else "RIGHT"
        if first <= number <= last and "_alt" not in f[3]:
            spans.setdefault(number, {})[side] = (int(f[1]), int(f[2]))
    return [(*spans[n]["LEFT"], *spans[n]["RIGHT"]) for n in sorted(spans)]


def truth_mutations(ref: bytes, amps: list[tuple[int, int, int, int]], seed: int) -> list[Mutation]:
    """44 mutations inside the amplicons' inserts (not in primers), 30 bp apart: 40 SNVs, deletions of 9 and
    6 bases and insertions of 3 and 1, each left-aligned (no shift gives the same sequence)."""
    rng = np.random.default_rng(seed)
    primers = np.zeros(len(ref), dtype=bool)
    for a, b, c, d in amps:
        primers[a:b] = primers[c:d] = True
    lo, hi = amps[0][1] + 20, amps[-1][2] - 20
    out: list[Mutation] = []
    taken: list[int] = []
    kinds = ["del9", "ins3", "del6", "ins1"] + ["snv"] * 40
    for k, kind in enumerate(kinds):
        for _ in range(100_000):  # too few amplicons for 44 mutations 30 bp apart would draw for ever
            p = int(rng.integers(lo, hi))
            if primers[p - 12 : p + 12].any() or any(abs(p - t) < 30 for t in taken):
                continue
            group = frozenset(GROUPS[k % len(GROUPS)])
            base = chr(ref[p])
            if kind == "snv":
                alt = "ACGT"[(int(rng.integers(1, 4)) + "ACGT".index(base)) % 4]
                out.append(Mutation(p, base, alt, group))
            elif kind.startswith("del"):
                n = int(kind[3:])
                if ref[p] == ref[p + n]:  # would shift left: choose another place
                    continue
                out.append(Mutation(p, ref[p : p + n + 1].decode(), base, group))
            else:
                n = int(kind[3:])
                inserted = "".join("ACGT"[int(i)] for i in rng.integers(0, 4, n))
                if inserted[-1] == base or inserted[0] == chr(ref[p + 1]):
                    continue
                out.append(Mutation(p, base, base + inserted, group))
            taken.append(p)
            break
        else:
            raise AssertionError(f"no room for mutation {k} ({kind}) in amplicons {amps[0]}..{amps[-1]}")
    return out


def haplotype(ref: bytes, mutations: list[Mutation], h: int) -> tuple[bytes, np.ndarray]:
    """The haplotype's sequence and, per reference position, its position in the haplotype."""
    seq, where, prev = [], np.zeros(len(ref) + 1, dtype=np.int64), 0
    shift = 0
    for m in sorted(mutations, key=lambda m: m.pos):
        if h not in m.haplotypes:
            continue
        seq.append(ref[prev : m.pos])
        where[prev : m.pos] = np.arange(prev, m.pos) + shift
        seq.append(m.alt.encode())
        where[m.pos] = m.pos + shift
        shift += len(m.alt) - len(m.ref)
        prev = m.pos + len(m.ref)
    seq.append(ref[prev:])
    where[prev:] = np.arange(prev, len(ref) + 1) + shift
    return b"".join(seq), where


def simulate_amplicons(ref_path: Path, out: Path, seed: int, pairs_per_amplicon: int = 160,
                       first: int = 1, last: int = 12) -> tuple[tuple[Path, Path], list[Mutation]]:
    """Paired 2x250 reads of ARTIC V3 amplicons ``first..last`` of four haplotypes mixed by :data:`WEIGHTS`:
    each read pair spans one whole amplicon (primers included), from seqlake's read simulator."""
    ref = read_reference(ref_path)
    seq = ref.seq.tobytes()
    amps = amplicons(PRIMER_BED, first, last)
    mutations = truth_mutations(seq, amps, seed)
    config = SimConfig(read_length=250, insert_mean=10_000, insert_sd=0, short_insert_fraction=0.0)
    paths = (out / "amplicons_R1.fastq.gz", out / "amplicons_R2.fastq.gz")
    first_pair = 0
    with gzip.open(paths[0], "wb") as o1, gzip.open(paths[1], "wb") as o2:
        for h, weight in enumerate(WEIGHTS):
            hap, where = haplotype(seq, mutations, h)
            for k, (a, _, _, d) in enumerate(amps):
                piece = np.frombuffer(hap[where[a] : where[d]], dtype=np.uint8).copy()
                amplicon = Reference((f"h{h}a{k}",), piece, np.zeros(1, dtype=np.int64),
                                     np.array([len(piece)], dtype=np.int64))
                rng = np.random.default_rng([seed, h, k])
                n = round(weight * pairs_per_amplicon)
                chunk = simulate_chunk(amplicon, n, rng, config, first_pair=first_pair)
                o1.write(format_fastq(chunk, 1))
                o2.write(format_fastq(chunk, 2))
                first_pair += n
    return paths, mutations


def test_simulated_amplicons_every_known_mutation_found_none_invented(tools: dict[str, str], reference: Path,
                                                                      tmp_path: Path) -> None:
    reads, mutations = simulate_amplicons(reference, tmp_path, seed=23)
    assert len(mutations) >= 40
    plan, oracle, differ = compare_with_ivar(tools, reads, reference, tmp_path, Params())
    assert len(differ) < 20, sorted(differ)
    assert seqlake_variants(plan) == oracle.variants
    assert seqlake_consensus(plan) == oracle.consensus
    rows = pq.read_table(plan.layout.partition("variants")).to_pylist()
    by_allele = {(r["pos"], r["ref"], r["alt"]): r for r in rows}
    for m in mutations:
        freq = sum(WEIGHTS[h] for h in m.haplotypes)
        row = by_allele.get((m.pos + 1, m.ref, m.alt))
        assert row is not None, m
        assert row["depth"] >= 100, (m, row)
        assert abs(row["alt_fraction"] - freq) < 0.1, (m, row)
        assert row["pass"] == (row["alt_fraction"] >= 0.25), (m, row)
    truth = {(m.pos + 1, m.ref, m.alt) for m in mutations}
    invented = [r for r in rows if r["pass"] and (r["pos"], r["ref"], r["alt"]) not in truth]
    assert invented == []
    # the consensus carries every mutation above 0.75 (IUPAC codes at mixed SNVs above the threshold)
    cons = seqlake_consensus(plan)
    assert cons.count("N") < len(cons)


GFF = TESTS / "data" / "MN908947.3.cds.gff3"


@pytest.mark.parametrize(("first", "last"), [(1, 12), (70, 82)])
def test_annotation_columns_equal_ivar_variants_g(tools: dict[str, str], reference: Path, tmp_path: Path,
                                                  first: int, last: int) -> None:
    """With --gff: gene, codons and amino acids equal ``ivar variants -g`` allele for allele (amplicons 1-12:
    ORF1a and ORF1ab overlap, two CDS per SNV; 70-82: the end of ORF1ab's second line, S's start)."""
    reads, _ = simulate_amplicons(reference, tmp_path, seed=29, first=first, last=last)
    plan, oracle, differ = compare_with_ivar(tools, reads, reference, tmp_path, Params(gff=str(GFF)))
    assert len(differ) < 20, sorted(differ)
    assert seqlake_variants(plan) == oracle.variants
    rows = pq.read_table(plan.layout.partition("variants")).to_pylist()
    mine = {ivar_key(r): tuple(r[c] for c in ("gene", "ref_codon", "ref_aa", "alt_codon", "alt_aa")) for r in rows}
    assert mine == oracle.annotations
    in_cds = [k for k, v in mine.items() if v[0] is not None]
    assert len(in_cds) >= 30, len(in_cds)
    if first == 1:  # every SNV of amplicons 1-12 is in ORF1ab's first line and in ORF1a
        assert all(mine[k][0] == "ORF1ab,ORF1a" for k in in_cds)
    # aa_change: one per CDS, SNVs named by codon, indels by their effect
    for r in rows:
        if r["type"] == "snv" and r["gene"] is not None:
            assert r["aa_change"].count(",") == r["gene"].count(","), r
        if r["type"] != "snv" and r["aa_change"] is not None:
            shift = (len(r["alt"]) - len(r["ref"])) % 3 != 0
            assert all(c.endswith("fs") == shift for c in r["aa_change"].split(",")), r
    cds = parse_gff(str(GFF), GFF.read_text(), None)
    indels = [r for r in rows if r["type"] != "snv" and r["pass"]]
    assert len(indels) >= 3
    for r in indels:  # an indel is in a CDS when the base after its anchor is
        assert (r["aa_change"] is not None) == any(c.start <= r["pos"] + 1 <= c.end for c in cds), r


# ---------------------------------------------------------------------------------- shard invariance
def staging_sums(plan: Plan) -> list[pa.Table]:
    """Every sample's allele counts and indels, window by window, as the reducers count them from the children's
    records (reduce/record_counts)."""
    rp = load_reduce_plan(plan)
    children = [(plan.layout.reads_slices(c), child_samples(plan, c)) for c in range(plan.array_size)]
    layouts = [(u, c, SliceLayout(tuple(rp.regions), rp.window, len(s))) for c, (u, s) in enumerate(children)]
    out: dict[str, list[pa.Table]] = {"alleles": [], "indels": []}
    for r, region in enumerate(rp.regions):
        entries = read_region_entries(layouts, r, plan.run_id)
        for w, win in enumerate(windows(region, rp.window)):
            reads = window_reads(children, entries, w)
            for sample in plan.samples:
                got = window_allele_tables(sample_records(reads.get(sample, [])), win, rp.contigs,
                                           plan.params.min_base_quality, sample)
                for name, parts in out.items():
                    parts.append(got[name])
    return [pa.concat_tables(out["alleles"]), pa.concat_tables(out["indels"])]


def test_counts_variants_and_consensus_are_shard_invariant(miseq: tuple[Path, Path], reference: Path,
                                                           tmp_path: Path) -> None:
    plans = [run_seqlake(miseq, reference, tmp_path / str(n), shards=n, params=Params()) for n in (1, 7, 64)]
    assert [p.array_size for p in plans] == [1, 7, 64]
    first = staging_sums(plans[0])
    assert first[0].num_rows > 4000 and first[1].num_rows > 100
    for plan in plans[1:]:
        assert all(a.equals(b) for a, b in zip(first, staging_sums(plan), strict=True))
        for table in ("variants", "consensus"):
            a, b = (pq.read_table(p.layout.partition(table)).drop_columns(
                ["fasta_uri"] if table == "consensus" else []) for p in (plans[0], plan))
            assert a.num_rows > 0 and a.equals(b), table
        assert seqlake_consensus(plan) == seqlake_consensus(plans[0])


def test_the_child_counts_the_reads_it_trimmed(miseq: tuple[Path, Path], reference: Path, tmp_path: Path) -> None:
    """Trimming in the child, or before it: the same counts (the child reads the trimmed bases in place)."""
    trimmed = trim_pairs(*miseq, tmp_path, Params())
    in_child = run_seqlake(miseq, reference, tmp_path / "child", params=Params())
    before = run_seqlake(trimmed, reference, tmp_path / "before")
    assert all(a.equals(b) for a, b in zip(staging_sums(in_child), staging_sums(before), strict=True))


# --------------------------------------------------------------------------------------------- pieces
def test_fisher_left_tail_matches_ivar_pvalues() -> None:
    # ivar 1.3.1's PVAL of two MiSeq variants: err = 0.01 (ALT_QUAL 24 and 27), mpileup depths 1048 and 69
    assert f"{ivar_pvalue(20, 499, 1048, 24):.6g}" == "0.000153649"
    assert f"{fisher_left(0, 68, 2, 60):.6g}" == "0.225522"
    assert fisher_left(3, 3, 0, 0) == 1.0


def test_overlap_parity_is_htslibs_name_hash() -> None:
    # __ac_Wang_hash(__ac_X31_hash_string(name)) & 1, computed by hand for these names
    def x31_wang(name: str) -> int:
        h = ord(name[0])
        for ch in name[1:]:
            h = (h * 31 + ord(ch)) & 0xFFFFFFFF
        key = h
        key = (key + (~(key << 15) & 0xFFFFFFFF)) & 0xFFFFFFFF
        key ^= key >> 10
        key = (key + (key << 3)) & 0xFFFFFFFF
        key ^= key >> 6
        key = (key + (~(key << 11) & 0xFFFFFFFF)) & 0xFFFFFFFF
        key ^= key >> 16
        return key & 1

    names = ["MS2_34001:1:1101:10037:18610", "r1", "SIM:1:FC:1:1:17:3001", "a" * 70]
    assert x31_wang_parity(names).tolist() == [bool(x31_wang(n)) for n in names]


def _counts(rows: dict[int, dict[str, int]]) -> dict[str, np.ndarray]:
    from seqlake.lake.tables import ALLELE_COUNT_COLUMNS

    pos = sorted(rows)
    out = {"pos": np.array(pos, dtype=np.int64)}
    for c in ALLELE_COUNT_COLUMNS:
        out[c.name] = np.array([rows[p].get(c.name, 0) for p in pos], dtype=np.int64)
    return out


def _entries(**olap: int) -> dict[str, int]:
    return {**{f"{b}_olap": n for b, n in olap.items()}, **{f"{b}_all": n for b, n in olap.items()}}


@pytest.mark.parametrize(("entries", "expected"), [
    ({"a": 20}, "A"),
    ({"a": 10, "g": 10}, "R"),  # a tie at the top is merged
    ({"a": 14, "c": 3, "t": 3}, "H"),  # below 0.75 until every allele of the last count is taken
    ({"a": 20, "del": 5}, "A"),
    ({"del": 20}, ""),  # a deletion wins: no base
    ({"a": 8, "del": 8}, "N"),  # with a deletion: N
    ({"a": 9}, "N"),  # below the minimum depth
])
def test_consensus_base_rules(entries: dict[str, int], expected: str) -> None:
    counts = _counts({0: _entries(**entries)})
    assert consensus_segment(counts, [], 0, 1, CallParams()) == expected


def test_consensus_insertions_need_the_reads_that_do_not_end_here() -> None:
    counts = _counts({0: {**_entries(a=20), "read_ends_olap": 4}, 1: _entries(c=20)})
    # 12 of the 16 reads continuing past position 0 carry AG: inserted; 6 of 16 carry G after A: not
    assert consensus_segment(counts, [Indel(0, 0, "AG", 8, 4)], 0, 2, CallParams()) == "AAGC"
    assert consensus_segment(counts, [Indel(0, 0, "AG", 4, 2)], 0, 2, CallParams()) == "AC"


def _spec_reg2bin(beg: int, end: int) -> int:
    """The SAM specification's reg2bin, level by level as it is printed there."""
    end -= 1
    for shift, first in ((14, 4681), (17, 585), (20, 73), (23, 9), (26, 1)):
        if beg >> shift == end >> shift:
            return first + (beg >> shift)
    return 0


def test_a_records_bin_is_the_specifications_across_every_level() -> None:
    """A record crossing a 16 kb, 128 kb, 1 Mb ... boundary goes one level up (a 2-base deletion across
    16,384 got bin -28,076 here, which no .tbi can hold: a 10 Mb genome's commit failed on it)."""
    from seqlake.lake.vcf import reg2bin

    edges = [1 << k for k in range(14, 30, 3)]
    cases = [(0, 1), (5, 6), (100, 16_000)] + [(e - 1, e + 1) for e in edges] + [(e - 5, e) for e in edges]
    cases += [(e * 3 - 2, e * 3 + 2) for e in edges] + [(1_458_175, 1_458_177), (0, 1 << 29)]
    for beg, end in cases:
        assert reg2bin(beg, end) == _spec_reg2bin(beg, end), (beg, end)


def test_vcf_is_bgzipped_and_tabix_finds_its_records(tmp_path: Path) -> None:
    tabix = shutil.which("tabix")
    if tabix is None:
        pytest.skip("tabix is not installed")
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    lines += [f"chr{c}\t{p}\t.\tA\tG\t.\tPASS\t." for c in (1, 2) for p in range(100, 200_000, 997)]
    # deletions whose REF crosses a 16 kb and a 128 kb window's edge: their bins are a level up
    lines += [f"chr3\t{p}\t.\tAGT\tA\t.\tPASS\t." for p in (16_383, 131_071, 140_000)]
    data = bgzf_compress(("\n".join(lines) + "\n").encode())
    assert gzip.decompress(data).decode() == "\n".join(lines) + "\n"
    vcf = tmp_path / "x.vcf.gz"
    vcf.write_bytes(data)
    (tmp_path / "x.vcf.gz.tbi").write_bytes(tabix_index(data, ["chr1", "chr2", "chr3"]))
    got = subprocess.run([tabix, str(vcf), "chr2:50000-90000"], capture_output=True, text=True, check=True).stdout
    want = [ln for ln in lines[2:] if ln.startswith("chr2\t") and 50000 <= int(ln.split("\t")[1]) <= 90000]
    assert got.splitlines() == want
    for region, starts in (("chr3:16385-16385", [16_383]), ("chr3:131073-140000", [131_071, 140_000])):
        got = subprocess.run([tabix, str(vcf), region], capture_output=True, text=True, check=True).stdout
        assert [int(ln.split("\t")[1]) for ln in got.splitlines()] == starts, region
    # htslib's pseudo-bin: bcftools reads each contig's record count from it
    bcftools = shutil.which("bcftools")
    if bcftools is not None:
        stats = subprocess.run([bcftools, "index", "--stats", str(vcf)], capture_output=True, text=True,
                               check=True).stdout
        counts = {ln.split("\t")[0]: int(ln.split("\t")[2]) for ln in stats.splitlines()}
        assert counts == {c: sum(ln.startswith(c + "\t") for ln in lines) for c in ("chr1", "chr2", "chr3")}
        assert subprocess.run([bcftools, "index", "-n", str(vcf)], capture_output=True, text=True,
                              check=True).stdout.strip() == str(len(lines) - 2)


def test_a_runs_vcf_fasta_and_index_are_what_htslib_reads(tools: dict[str, str], reference: Path,
                                                          tmp_path: Path) -> None:
    """A two-contig reference: the consensus FASTA's records are named apart (samtools faidx indexes it and
    fetches each), the VCF names its reference, an indel's AD sums to its DP, and ``bcftools index -n`` gives
    the VCF's record count from the .tbi."""
    bcftools = shutil.which("bcftools")
    if bcftools is None:
        pytest.skip("bcftools is not installed (make tools installs it)")
    reads, _ = simulate_amplicons(reference, tmp_path, seed=31)
    genome = "".join(reference.read_text().split("\n")[1:])
    two = tmp_path / "two.fasta"  # the genome cut in two contigs, as a segmented virus's reference is
    two.write_text(f">segA\n{genome[:1200]}\n>segB\n{genome[1200:]}\n")
    plan = run_seqlake(reads, two, tmp_path / "lake", params=Params())
    fasta = Path(plan.layout.sample_file("s", CONSENSUS_SUFFIX))
    names = [ln[1:].split()[0] for ln in fasta.read_text().splitlines() if ln.startswith(">")]
    assert names == ["s|segA", "s|segB"]
    subprocess.run([tools["samtools"], "faidx", str(fasta)], check=True, capture_output=True)
    for name in names:
        got = subprocess.run([tools["samtools"], "faidx", str(fasta), name], capture_output=True, text=True,
                             check=True).stdout
        assert got.startswith(f">{name}\n") and len("".join(got.split("\n")[1:])) > 1000
    vcf = plan.layout.sample_file("s", VCF_SUFFIX)
    text = gzip.decompress(Path(vcf).read_bytes()).decode()
    assert f"##reference={two}\n" in text
    records = [ln.split("\t") for ln in text.splitlines() if not ln.startswith("#")]
    assert len(records) > 20
    for r in records:
        fmt = dict(zip(r[8].split(":"), r[9].split(":"), strict=True))
        if "TYPE=snv" not in r[7]:
            assert sum(map(int, fmt["AD"].split(","))) == int(fmt["DP"]), r
    n = subprocess.run([bcftools, "index", "-n", vcf], capture_output=True, text=True, check=True).stdout
    assert int(n) == len(records)


def _first_pairs(reads: tuple[Path, Path], pairs: int, out: Path) -> tuple[Path, Path]:
    """The first ``pairs`` read pairs of a library (a negative control that a little of it got into)."""
    paths = (out / "neg_R1.fastq", out / "neg_R2.fastq")
    for src, dest in zip(reads, paths, strict=True):
        dest.write_text("".join(gzip.decompress(src.read_bytes()).decode().splitlines(keepends=True)[: 4 * pairs]))
    return paths


def test_each_genome_gets_its_qc_verdict(reference: Path, tmp_path: Path) -> None:
    """A mixed library of four haplotypes (alleles at 10-55 %) with a 1-base insertion in ORF1ab at 55 %, and a
    negative control holding some of its reads: the mixture and the frameshift warn (the sample fails on
    completeness: 12 of 98 amplicons), the control fails as contaminated; a clean single haplotype passes the
    mixture check."""
    reads, mutations = simulate_amplicons(reference, tmp_path, seed=23)
    assert any(m.ref == m.alt[0] and len(m.alt) == 2 for m in mutations)  # the 1-base insertion
    neg = _first_pairs(reads, 400, tmp_path)
    samples = [Sample("mixed", str(reads[0]), str(reads[1]), {"control": ""}),
               Sample("ntc", str(neg[0]), str(neg[1]), {"control": "negative"})]
    params = Params(gff=str(GFF))
    plan = make_plan("run", samples, out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(reference), params.preset), params=params)
    for child in range(plan.array_size):
        worker.process_child(plan, child)
    merge.merge_run(plan)
    rows = {r["sample"]: r for r in pq.read_table(plan.layout.partition("sample_summary")).to_pylist()}
    mixed, ntc = rows["mixed"], rows["ntc"]
    assert mixed["qc_status"] == "fail" and mixed["control_type"] is None, mixed["qc_reasons"]
    reasons = mixed["qc_reasons"].split("; ")
    assert reasons[0].startswith("incomplete genome: ")
    assert any(r.startswith("possible frameshift: 1 ") for r in reasons), reasons
    assert any(r.startswith("possible mixture: ") for r in reasons), reasons
    assert ntc["control_type"] == "negative" and ntc["control"] is True
    assert ntc["qc_status"] == "fail" and "contamination" in ntc["qc_reasons"], ntc
    consensus = {r["sample"]: r for r in pq.read_table(plan.layout.partition("consensus")).to_pylist()}
    assert consensus["mixed"]["frameshift_indels"] == 1 and consensus["mixed"]["mixed_alleles"] >= 20
