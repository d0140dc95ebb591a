"""The reference is pinned by its content and indexed once, before any child runs, in seqlake's own cache:
a replaced reference is another genome (never the old index), a child refuses a reference changed since
the plan, and the merge refuses a child that aligned to another one."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from seqlake.base.cachedir import REF_CACHE_VAR
from seqlake.base.errors import EXIT_BAD_INPUT, BadInputError, SeqlakeError
from seqlake.base.model import Sample
from seqlake.child.worker import process_child
from seqlake.child.worker_main import worker_command
from seqlake.cli import main
from seqlake.commit.merge import merge_run
from seqlake.demo_data.simulate import write_pairs
from seqlake.lake.staging import ChildManifest
from seqlake.plan.planner import make_plan
from seqlake.plan.reference import (
    index_ready,
    load_contigs,
    load_fasta_index,
    local_index,
    pin_reference,
    read_bases,
)
from seqlake.plan.refindex import ensure_index, fasta_contigs, indexed_reference

PAIRS = 300


@pytest.fixture
def ref_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "refcache"
    monkeypatch.setenv(REF_CACHE_VAR, str(cache))
    return cache


@pytest.fixture
def genome(tmp_path: Path, reference: Path) -> Path:
    """A user's reference FASTA, alone in its folder (a copy of the SARS-CoV-2 one)."""
    folder = tmp_path / "genomes"
    folder.mkdir()
    fasta = folder / "ref.fa"
    fasta.write_bytes(reference.read_bytes())
    return fasta


@pytest.fixture
def reads(tmp_path: Path, reference: Path) -> tuple[Path, Path]:
    r1, r2 = tmp_path / "s_R1.fastq.gz", tmp_path / "s_R2.fastq.gz"
    write_pairs(reference, r1, r2, PAIRS, seed=7)
    return r1, r2


def other_genome(length: int = 29_903, seed: int = 3) -> bytes:
    """A random genome the SARS-CoV-2 reads do not map to."""
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)[np.random.default_rng(seed).integers(0, 4, length)]
    return b">other\n" + b"\n".join(bases[i:i + 60].tobytes() for i in range(0, length, 60)) + b"\n"


def mapped_rows(out: Path) -> list[str]:
    """The contig of every mapped alignment row of the run written to ``out``."""
    parts = sorted((out / "results" / "alignments").rglob("*.parquet"))
    return [c for p in parts for c in pq.read_table(p, columns=["contig"]).column("contig").to_pylist() if c]


def test_a_replaced_reference_gives_the_new_genomes_alignments(
    genome: Path, reads: tuple[Path, Path], ref_cache: Path, tmp_path: Path
) -> None:
    # Given a run against the reference the reads come from
    args = [*map(str, reads), "--reference", str(genome), "--jobs", "1"]
    assert main(["process", *args, "--out", str(tmp_path / "first")]) == 0
    first = mapped_rows(tmp_path / "first")
    assert len(first) >= 2 * PAIRS * 0.95 and set(first) == {"MN908947.3"}
    # When the user overwrites the FASTA with another genome and runs again
    genome.write_bytes(other_genome())
    assert main(["process", *args, "--out", str(tmp_path / "second")]) == 0
    # Then the reads are aligned to the new genome: none maps, and its contig is the one recorded
    assert mapped_rows(tmp_path / "second") == []
    summary = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert summary["totals"]["reference_md5"].keys() == {"other"}
    # and nothing was ever written beside the user's FASTA: the indexes are in the reference cache
    assert [p.name for p in genome.parent.iterdir()] == ["ref.fa"]
    assert Path(summary["reference_index"]).is_relative_to(ref_cache / "reference-indexes")
    assert summary["run_id"] != json.loads((tmp_path / "first" / "summary.json").read_text())["run_id"]


def test_a_child_whose_reference_changed_since_the_plan_fails_with_the_reason(
    genome: Path, reads: tuple[Path, Path], ref_cache: Path, tmp_path: Path
) -> None:
    plan = make_plan("changed", [Sample("s", *map(str, reads))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(genome)))
    # Given the reference replaced after the plan (the index of the planned one is stored, and stays)
    genome.write_bytes(other_genome())
    # When the child runs (as Batch starts it), Then it fails as for a changed input: bad input, exit 65,
    # its reason recorded for the failure step
    assert worker_command(argparse.Namespace(plan=plan.plan_uri, shard=0)) == EXIT_BAD_INPUT
    record = json.loads(Path(plan.layout.child_error(0)).read_text())
    assert record["file"] == str(genome)
    assert record["message"] == ("the reference changed after the run was planned (size, ETag or mtime differ); "
                                 "start a new run")
    assert not Path(plan.layout.manifest(0)).exists()


def test_the_index_is_built_before_the_children_which_only_load_it(
    genome: Path, reads: tuple[Path, Path], ref_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When a run is planned, Then its reference's index and contigs are stored under the pin's key
    plan = make_plan("once", [Sample("s", *map(str, reads))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(genome)), shards=2)
    pin = plan.reference
    assert pin is not None and index_ready(pin)
    index = ref_cache / "reference-indexes" / pin.key / "index.mmi"
    assert pin.index_uri == local_index(pin) == str(index)
    built = index.stat().st_mtime_ns
    # and the children never build it (a build now would fail them), nor copy a local store's index
    monkeypatch.setattr("seqlake.plan.refindex._build", lambda *a: pytest.fail("a child built the index"))
    manifests = [process_child(plan, child) for child in range(plan.array_size)]
    assert {m.reference for m in manifests} == {pin.key}
    assert manifests[0].contigs == [("MN908947.3", 29903)]
    # and planning again with the same reference uses the stored index as it is
    again = indexed_reference(str(genome))
    make_plan("again", [Sample("s", *map(str, reads))], out_prefix=str(tmp_path / "lake"), reference=again)
    assert index.stat().st_mtime_ns == built
    assert sorted(p.name for p in index.parent.iterdir()) == ["contigs.json", "index.mmi", "lock"]


def test_the_key_is_the_content_and_the_preset(genome: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    pin = pin_reference(str(genome), "sr", store)
    assert pin.sha256 == hashlib.sha256(genome.read_bytes()).hexdigest() and pin.size == genome.stat().st_size
    # the same bytes under another name share the index; another preset or other bytes do not
    twin = tmp_path / "twin.fa"
    twin.write_bytes(genome.read_bytes())
    assert pin_reference(str(twin), "sr", store).key == pin.key
    assert pin_reference(str(genome), "map-ont", store).key != pin.key
    genome.write_bytes(genome.read_bytes().replace(b"ACGT", b"ACGA", 1))
    assert pin_reference(str(genome), "sr", store).key != pin.key


def test_the_merge_refuses_a_child_aligned_to_another_reference(
    genome: Path, reads: tuple[Path, Path], ref_cache: Path, tmp_path: Path
) -> None:
    plan = make_plan("merge", [Sample("s", *map(str, reads))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(genome)), shards=2)
    for child in range(plan.array_size):
        process_child(plan, child)
    # Given child 1's manifest naming another reference index (a child of another plan of this run)
    uri = Path(plan.layout.manifest(1))
    manifest = ChildManifest.from_json(uri.read_bytes())
    manifest.reference = "0" * 24
    uri.write_bytes(manifest.to_json())
    # Then the merge fails naming the child and both references
    assert plan.reference is not None
    with pytest.raises(SeqlakeError, match=rf"child 1 .*aligned to reference index 0{{24}}, the plan's is "
                                           rf"{plan.reference.key} \({plan.reference.uri}\)"):
        merge_run(plan)


def test_a_mmi_reference_is_its_own_index(genome: Path, ref_cache: Path, minimap2: str) -> None:
    mmi = genome.with_suffix(".mmi")
    subprocess.run([minimap2, "-x", "sr", "-d", str(mmi), str(genome)], check=True, capture_output=True)
    expected = fasta_contigs(str(genome))  # a pure A/C/G/T genome: the index keeps every base as it is
    genome.unlink()
    pin = indexed_reference(str(mmi))
    # only its contigs are stored; children load the user's file, and nothing is written beside it
    assert load_contigs(pin) == expected
    assert local_index(pin) == str(mmi) and [p.name for p in mmi.parent.iterdir()] == ["ref.mmi"]


def test_contig_md5s_are_those_samtools_writes(tmp_path: Path, samtools: str) -> None:
    # Given a FASTA with lowercase bases, IUPAC codes (minimap2's index keeps them as N), lines of any
    # width, a description after the name and an empty sequence
    fasta = tmp_path / "iupac.fa"
    fasta.write_bytes(b">one first contig\nACGTRYacgtnn\nAC\n>two\nGGGGKM\nss\n>empty\n>three\n" + b"T" * 70 + b"\n")
    dictionary = subprocess.run([samtools, "dict", str(fasta)], check=True, capture_output=True, text=True).stdout
    expected = []
    for line in dictionary.splitlines():
        if line.startswith("@SQ"):
            tags = dict(field.split(":", 1) for field in line.split("\t")[1:])
            expected.append((tags["SN"], int(tags["LN"]), tags["M5"]))
    got = [(c.name, c.length, c.md5) for c in fasta_contigs(str(fasta))]
    assert got == expected and len(got) == 4
    # gzip gives the same, read as a stream
    packed = tmp_path / "iupac.fa.gz"
    packed.write_bytes(gzip.compress(fasta.read_bytes()))
    assert [(c.name, c.length, c.md5) for c in fasta_contigs(str(packed))] == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", r"x\.fa: the reference holds no sequence"),
        (b"\nACGT\n>a\nAC\n", r"x\.fa:2: not a FASTA file: sequence before the first '>' header"),
        (b">a\nAC\n>a\nGG\n", r"x\.fa: sequence 2 is named 'a', as an earlier one"),
        (b">a\nAC\n> \nGG\n", r"x\.fa:3: a '>' header without a name"),
    ],
)
def test_a_bad_reference_is_one_line_naming_it(tmp_path: Path, ref_cache: Path, body: bytes, message: str) -> None:
    fasta = tmp_path / "x.fa"
    fasta.write_bytes(body)
    with pytest.raises(BadInputError, match=f"^{tmp_path}/{message}$"):
        ensure_index(pin_reference(str(fasta), "sr", str(ref_cache)))
    assert [p.name for p in tmp_path.iterdir() if p.name != "refcache"] == ["x.fa"]


def test_a_missing_reference_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"nope\.fa: the reference does not exist"):
        pin_reference(str(tmp_path / "nope.fa"), "sr", str(tmp_path))


def test_the_plan_refuses_a_reference_whose_index_is_not_stored(
    genome: Path, reads: tuple[Path, Path], ref_cache: Path, tmp_path: Path
) -> None:
    """No child may build it: the plan is made only once the index is stored."""
    pin = pin_reference(str(genome), "sr", str(ref_cache))
    with pytest.raises(ValueError, match=r"ref\.fa: no index at .*contigs\.json: build it before the plan"):
        make_plan("early", [Sample("s", *map(str, reads))], out_prefix=str(tmp_path / "lake"), reference=pin)
    assert not (tmp_path / "lake").exists()


def test_the_commit_calls_variants_only_against_the_planned_genome(
    genome: Path, reads: tuple[Path, Path], ref_cache: Path, tmp_path: Path
) -> None:
    plan = make_plan("calls", [Sample("s", *map(str, reads))], out_prefix=str(tmp_path / "lake"),
                     reference=indexed_reference(str(genome)))
    process_child(plan, 0)
    # Given the reference replaced after the children aligned to it
    genome.write_bytes(other_genome())
    # Then the commit, which reads its sequence for variants and consensus, fails with the reason
    with pytest.raises(BadInputError, match=r"ref\.fa: the reference changed after the run was planned"):
        merge_run(plan)
    assert not (tmp_path / "lake" / "results" / "variants").exists()


@pytest.mark.parametrize(("name", "fasta", "reads_itself"), [
    ("even.fa", lambda s: _fasta(s, 60, "\n"), True),          # samtools faidx's numbers of the FASTA itself
    ("crlf.fa", lambda s: _fasta(s, 70, "\r\n"), True),
    ("gz.fa.gz", lambda s: gzip.compress(_fasta(s, 60, "\n")), False),  # no byte ranges: a copy of the bases
    ("uneven.fa", lambda s: _fasta(s, 60, "\n").replace(b"C", b"C\n", 1), False),  # a short line inside
])
def test_a_regions_bases_are_read_by_one_range_through_the_stored_fasta_index(
        ref_cache: Path, tmp_path: Path, name: str, fasta: Any, reads_itself: bool) -> None:
    rng = np.random.default_rng(11)
    seqs = {"a": "".join(rng.choice(list("ACGTacgtN"), 1234)), "b": "".join(rng.choice(list("ACGT"), 61)),
            "c": "ACG"}
    path = tmp_path / name
    path.write_bytes(fasta(seqs))
    index = load_fasta_index(indexed_reference(str(path)))
    assert (index.uri == str(path)) == reads_itself
    for contig, seq in seqs.items():
        for start, stop in ((0, len(seq)), (5, 7), (59, 61), (60, 121), (len(seq) - 1, len(seq) + 10)):
            assert read_bases(index, contig, start, stop) == seq.upper()[start:stop].encode(), (contig, start, stop)


def _fasta(seqs: dict[str, str], width: int, newline: str) -> bytes:
    return "".join(f">{n} about it{newline}" + newline.join(s[i : i + width] for i in range(0, len(s), width))
                   + newline for n, s in seqs.items()).encode()


def test_a_copy_of_an_indexed_fasta_is_read_where_it_is(tmp_path: Path, ref_cache: Path) -> None:
    """The index is keyed by the reference's content: a copy at another path (the first one since removed)
    shares it, and its bases are read from the copy, not from where the index was made."""
    seqs = {"a": "ACGT" * 40, "b": "TTGCA" * 30}
    first, second = tmp_path / "first.fa", tmp_path / "second.fa"
    first.write_bytes(_fasta(seqs, 60, "\n"))
    assert load_fasta_index(indexed_reference(str(first))).uri == str(first)
    second.write_bytes(first.read_bytes())
    first.unlink()
    index = load_fasta_index(indexed_reference(str(second)))
    assert index.uri == str(second)
    assert read_bases(index, "b", 3, 70) == seqs["b"][3:70].encode()
