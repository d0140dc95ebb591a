"""``--cram`` (reduce/cramencode, reduce/bams.write_crams, formats/cram): each sample's CRAM holds the records of the
BAM the same run makes without ``--cram`` (``samtools view -T reference.fasta``, every field and tag: samtools
adds ``MD`` when it decodes, by default, which the BAM never had), passes ``samtools quickcheck``, its ``.crai``
is the one ``samtools index`` makes of it and answers region queries alike, and it is smaller than the BAM
(``pytest -s`` prints both sizes). Cases: the demo reads in 4 children over 6 regions (pieces from several
reducers, windows merged from several children); three samples in reducer groups of their own, one of two
lanes, one with no read; a reference of four contigs, one without reads; the real MiSeq pair in amplicon mode
(primer clips as soft clips)."""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bam_queries import same_answers

from seqlake import demo_data
from seqlake.formats import cram

PRIMER_BED = Path(__file__).resolve().parents[1] / "data" / "nCoV-2019.V3.primer.bed"


#: ``seqlake process`` with every sample its own reducer group (the reducers' work target made tiny)
GROUPED = ("import sys; import seqlake.plan.sizing as s; s.REDUCER_TARGET_SECONDS = 0.001; "
           "from seqlake.cli import run; sys.argv[0] = 'seqlake'; run()")


def _genomes(out: Path, inputs: list[str], reference: Path, *extra: str, grouped: bool = False) -> Path:
    head = [sys.executable, "-c", GROUPED] if grouped else [sys.executable, "-m", "seqlake"]
    subprocess.run([*head, "process", *inputs, "--reference", str(reference), "--out", str(out), "--jobs", "2",
                    *extra], check=True, capture_output=True)
    (folder,) = out.glob("results/genomes/run_id=*")
    return folder


def _records(samtools: str, *args: str) -> list[str]:
    return subprocess.run([samtools, "view", "--no-PG", *args], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def _without_md(line: str) -> str:
    return "\t".join(f for f in line.split("\t") if not f.startswith("MD:Z:"))


def _regions(n: int, fai: Path) -> list[str]:
    """Each contig whole, its first and last base, ``*``, and ``n`` random regions."""
    rng = random.Random(35)
    contigs = [(name, int(length)) for name, length, *_ in (x.split("\t") for x in fai.read_text().splitlines())]
    out = ["*"]
    for name, length in contigs:
        out += [name, f"{name}:1-1", f"{name}:{length}-{length}"]
    for _ in range(n):
        name, length = rng.choice(contigs)
        a = rng.randrange(1, length)
        out.append(f"{name}:{a}-{min(length, a + rng.choice((1, 50, 400, 3000, 12000)))}")
    return out


def _check(tmp_path: Path, samtools: str, inputs: list[str], reference: Path, *extra: str,
           grouped: bool = False) -> None:
    bam_dir = _genomes(tmp_path / "bam", inputs, reference, *extra, grouped=grouped)
    cram_dir = _genomes(tmp_path / "cram", inputs, reference, *extra, "--cram", grouped=grouped)
    ref = cram_dir / "reference.fasta"
    assert not list(cram_dir.glob("*.bam")), "the CRAM replaces the BAM"
    assert (cram_dir / "reference.fasta.fai").is_file()
    assert ref.read_bytes().replace(b"\n", b"").upper() == reference.read_bytes().replace(b"\n", b"").upper()
    bams = sorted(bam_dir.glob("*.bam"))
    assert bams and sorted(p.stem for p in cram_dir.glob("*.cram")) == [p.stem for p in bams]
    for bam in bams:
        _same_as_bam(tmp_path, samtools, bam, cram_dir / f"{bam.stem}.cram", ref)


def _same_as_bam(tmp_path: Path, samtools: str, bam: Path, crm: Path, ref: Path) -> None:
    assert crm.with_suffix(".cram.crai").is_file()
    subprocess.run([samtools, "quickcheck", "-v", str(crm)], check=True)
    # the header: the BAM's (@SQ M5, @RG, @PG)
    assert _records(samtools, "-H", str(crm)) == _records(samtools, "-H", str(bam))
    # the records: every field and tag, but the MD samtools computes as it decodes a CRAM (decode_md)
    theirs = _records(samtools, str(bam))
    ours = _records(samtools, "-T", str(ref), str(crm))
    assert len(ours) == len(theirs)
    assert [_without_md(x) for x in ours] == theirs
    assert all("\tMD:Z:" not in x for x in theirs)
    # most records' NM is not stored (htslib drops it where it can give it back from the bases) but comes back
    # equal, as the comparison above shows
    stored = _records(samtools, "--input-fmt-option", "decode_md=0", "-T", str(ref), str(crm))
    kept = sum("\tNM:i:" in x for x in stored)
    assert kept <= len(stored) / 4
    # the .crai: the one samtools index makes of the file, and the same answers to region queries
    copy = tmp_path / "theirs.cram"
    shutil.copyfile(crm, copy)
    subprocess.run([samtools, "index", str(copy)], check=True)
    assert cram.parse_crai(crm.with_suffix(".cram.crai").read_bytes()) == cram.parse_crai(
        Path(str(copy) + ".crai").read_bytes())
    assert crm.with_suffix(".cram.crai").read_bytes()[:2] == b"\x1f\x8b"  # gzip, as samtools writes it
    answered = same_answers(samtools, crm, copy, _regions(60, Path(f"{ref}.fai")), options=("-T", str(ref)))
    assert answered > 20 or not theirs
    print(f"{bam.name}: BAM {bam.stat().st_size:,} bytes, CRAM {crm.stat().st_size:,} bytes "
          f"({crm.stat().st_size / bam.stat().st_size:.2f}x), reference {ref.stat().st_size:,}; {len(ours):,} "
          f"records, NM stored in {kept:,}")
    assert crm.stat().st_size < bam.stat().st_size or not theirs


def test_demo_cram_in_pieces_of_several_children_and_regions(tmp_path: Path, samtools: str) -> None:
    r1, r2, reference = demo_data.paths()
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"region_size": 5000}))  # 6 regions: 6 reducers' pieces in each CRAM
    _check(tmp_path, samtools, [str(r1), str(r2)], reference, "--reads-per-shard", "12000", "--params", str(params))
    runs = list((tmp_path / "cram").glob("runs/*/reduce/region=*.cram"))
    assert len(runs) == 7  # 6 regions, and the last one's unplaced reads


def test_samples_in_groups_lanes_and_an_empty_one(tmp_path: Path, samtools: str, edge: Path) -> None:
    """Three samples in reducer groups of their own (the header's @RG list, in each group's reducers): one of two
    lanes (two @RG, one index into them per record), one with no read at all (a CRAM of no container)."""
    r1, r2, reference = demo_data.paths()
    lanes = []
    for lane, (a, b) in enumerate(((0, 16000), (16000, 40000)), start=1):
        pair = []
        for mate in (r1, r2):
            lines = gzip.decompress(mate.read_bytes()).splitlines(keepends=True)[a:b]
            pair.append(tmp_path / f"lane{lane}_{mate.name}")
            pair[-1].write_bytes(gzip.compress(b"".join(lines)))
        lanes.append(pair)
    sheet = tmp_path / "samplesheet.csv"
    sheet.write_text("sample,fastq_1,fastq_2,lane\n" + f"demo,{r1},{r2},\n"
                     + "".join(f"two,{a},{b},{lane}\n" for lane, (a, b) in enumerate(lanes, start=1))
                     + f"empty,{edge / 'cutadapt' / 'empty.fastq'},,\n")
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"region_size": 10000}))
    _check(tmp_path, samtools, ["--samplesheet", str(sheet)], reference, "--reads-per-shard", "6000",
           "--params", str(params), grouped=True)
    plan = json.loads(next((tmp_path / "cram").glob("runs/*/reduce/regions.json")).read_text())
    assert len(plan["groups"]) >= 2  # the empty sample joins another's group
    assert len(list((tmp_path / "cram").glob("runs/*/reduce/region=*.unplaced.cram"))) == len(plan["groups"])
    header = _records(samtools, "-H", str(next((tmp_path / "cram").glob("results/genomes/*/two.cram"))))
    assert sum(x.startswith("@RG") for x in header) == 2


@pytest.mark.external_data
def test_miseq_amplicon_cram(tmp_path: Path, samtools: str, miseq: tuple[Path, Path], reference: Path) -> None:
    _check(tmp_path, samtools, [str(m) for m in miseq], reference, "--primer-bed", str(PRIMER_BED))


def test_crams_framing_is_htslibs() -> None:
    """The EOF container is the spec's; ITF8 as htslib writes it."""
    assert len(cram.EOF) == 38 and cram.EOF[4:8] == b"\xff\xff\xff\xff"
    assert [cram.itf8(v) for v in (0, 0x7F, 0x80, 0x3FFF, 0x4000, -1)] == [
        b"\0", b"\x7f", b"\x80\x80", b"\xbf\xff", b"\xc0\x40\x00", b"\xff\xff\xff\xff\x0f"]
    assert cram.file_definition("x.cram")[:6] == b"CRAM\x03\x00" and len(cram.file_definition("a" * 40)) == 26


def test_a_reference_of_several_contigs(tmp_path: Path, samtools: str) -> None:
    """The genome cut into three contigs, and a fourth no read maps to: a reducer's local reference holds only
    the contigs its records lie on (the others' M5 in its header), every contig's M5 in the CRAM's."""
    r1, r2, reference = demo_data.paths()
    bases = b"".join(reference.read_bytes().splitlines()[1:])
    rng = random.Random(4)
    contigs = {"a": bases[:10000], "b": bases[10000:20000], "c": bases[20000:],
               "d": bytes(rng.choice(b"ACGT") for _ in range(7000))}
    fasta = tmp_path / "ref" / "cut.fasta"
    fasta.parent.mkdir()
    fasta.write_bytes(b"".join(b">" + n.encode() + b"\n" + b"\n".join(s[i:i + 70] for i in range(0, len(s), 70))
                               + b"\n" for n, s in contigs.items()))
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"region_size": 4000}))
    _check(tmp_path, samtools, [str(r1), str(r2)], fasta, "--params", str(params))
    header = _records(samtools, "-H", str(next((tmp_path / "cram").glob("results/genomes/*/demo.cram"))))
    assert sum(x.startswith("@SQ") and "\tM5:" in x for x in header) == 4


def test_a_gzip_reference_is_kept_as_plain_fasta(tmp_path: Path, samtools: str) -> None:
    """A gzip-compressed reference is kept beside the CRAM as plain FASTA (the store's one-line copy of its
    bases, one line per contig), which decodes it."""
    r1, r2, reference = demo_data.paths()
    gz = tmp_path / "ref.fasta.gz"
    gz.write_bytes(gzip.compress(reference.read_bytes()))
    genomes = _genomes(tmp_path / "cram", [str(r1), str(r2)], gz, "--cram")
    ref = genomes / "reference.fasta"
    assert (genomes / "reference.fasta.fai").read_text() == "MN908947.3\t29903\t12\t29903\t29904\n"
    assert ref.read_bytes().replace(b"\n", b"") == reference.read_bytes().replace(b"\n", b"")
    count = subprocess.run([samtools, "view", "-c", "-T", str(ref), str(genomes / "demo.cram")], capture_output=True,
                           text=True, check=True).stdout
    assert int(count) == 39_866


def test_a_piece_encoded_with_other_read_groups_fails_the_commit_naming_it(tmp_path: Path) -> None:
    """A CRAM record's read group is an index into its header's ``@RG`` list: a reducer's piece encoded under
    another list than the header the commit writes would give its reads the wrong groups, silently. The commit
    joins the pieces only when each was encoded with the header's own list."""
    from seqlake.base.errors import SeqlakeError
    from seqlake.lake.regions import load_reduce_plan
    from seqlake.plan.planfile import load_plan
    from seqlake.reduce.bams import write_crams
    from seqlake.reduce.cramencode import group_read_groups

    r1, r2, reference = demo_data.paths()
    out = tmp_path / "out"
    _genomes(out, [str(r1), str(r2)], Path(reference), "--cram")
    (plan_file,) = out.glob("runs/*/plan.json")
    plan = load_plan(str(plan_file))
    rp = load_reduce_plan(plan)
    groups = group_read_groups(plan, range(plan.array_size))  # the children's, as the commit lists them
    write_crams(plan, rp, {}, {}, groups)  # the run's own pieces: joined again
    offsets = Path(plan.layout.region_crams_offsets(0))
    pieces = json.loads(offsets.read_text())
    pieces["samples"]["demo"]["read_groups"] = ["another-group"]
    offsets.write_text(json.dumps(pieces))
    with pytest.raises(SeqlakeError, match=r"region=00000\.cram: sample demo's pieces were encoded with the read "
                                           r"groups \['another-group'\]"):
        write_crams(plan, rp, {}, {}, groups)
