"""Primer BEDs of every generation accepted (issue 37 item 2), the BED pinned by content in the run's identity,
and a missing or wrong BED refused before anything is uploaded or planned (exit 65, ``file:line``).

The BEDs here are written by hand in each documented style (ARTIC V1-V3's ``nCoV-2019_N_LEFT`` with ``_alt``
primers and pools as numbers or as ``nCoV-2019_1``; ARTIC V4/V4.1's ``SARS-CoV-2_N_LEFT``; primerschemes.org's
7 columns with ``SARS-CoV-2_N_LEFT_1`` / ``_2`` and the primer's bases last) over a made-up 2 kb contig: the
coordinates are no real scheme's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud.state import StateDir, md5_file
from seqlake.base.errors import BadInputError
from seqlake.local.commands import previous_run
from seqlake.plan.primers import content_pin, load_primer_scheme, parse_primer_bed, pin_primer_bed, with_primer_pin

CONTIGS = {"chrV": 2_000}
#: (amplicon, LEFT primers, RIGHT primers) as (start, end) pairs: amplicon 2 has an alternative of each side
LAYOUT = [(1, [(10, 32)], [(400, 424)]), (2, [(350, 372), (352, 375)], [(760, 782), (765, 788)]),
          (3, [(700, 722)], [(1_100, 1_124)])]


def _lines(name_of: object, pool_of: object, seventh: bool = False) -> str:
    out = []
    for amplicon, lefts, rights in LAYOUT:
        for side, primers, strand in (("LEFT", lefts, "+"), ("RIGHT", rights, "-")):
            for k, (start, end) in enumerate(primers):
                fields = ["chrV", str(start), str(end), name_of(amplicon, side, k), pool_of(amplicon), strand]  # type: ignore[operator]
                if seventh:
                    fields.append("ACGT" * ((end - start) // 4) + "A" * ((end - start) % 4))
                out.append("\t".join(fields))
    return "\n".join(out) + "\n"


STYLES = {
    # ARTIC V1 / V2: pools named after the scheme
    "artic-v1": _lines(lambda a, s, k: f"nCoV-2019_{a}_{s}" + (f"_alt{k}" if k else ""),
                       lambda a: f"nCoV-2019_{2 - a % 2}"),
    # ARTIC V3: pools as numbers, alternatives _alt0.. (nCoV-2019_7_LEFT_alt0)
    "artic-v3": _lines(lambda a, s, k: f"nCoV-2019_{a}_{s}" + (f"_alt{k - 1}" if k else ""), lambda a: str(2 - a % 2)),
    # ARTIC V4 / V4.1: the SARS-CoV-2 prefix, _alt1 alternatives
    "artic-v4.1": _lines(lambda a, s, k: f"SARS-CoV-2_{a}_{s}" + (f"_alt{k}" if k else ""), lambda a: str(2 - a % 2)),
    # primerschemes.org (ARTIC V5.3.2, V5.4.2): 7 columns, every primer numbered, the sequence last
    "primerschemes": _lines(lambda a, s, k: f"SARS-CoV-2_{a}_{s}_{k + 1}", lambda a: str(2 - a % 2), seventh=True),
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_generation_of_primer_bed_gives_the_same_amplicons(style: str) -> None:
    amplicons = parse_primer_bed(f"{style}.bed", STYLES[style], CONTIGS).amplicons
    assert [(a.start, a.end, a.insert_start, a.insert_end) for a in amplicons] == [
        (10, 424, 32, 400), (350, 788, 375, 760), (700, 1_124, 722, 1_100)]
    assert [a.name.rsplit("_", 1)[1] for a in amplicons] == ["1", "2", "3"]


def test_a_seventh_column_that_is_not_a_sequence_is_named_with_its_line(tmp_path: Path) -> None:
    bad = STYLES["primerschemes"].replace("\tACGTACGT", "\tACGT7CGT", 1)
    with pytest.raises(BadInputError, match=r"^x\.bed:1: primer SARS-CoV-2_1_LEFT_1: column 7 'ACGT7CGT"):
        parse_primer_bed("x.bed", bad, CONTIGS)


def test_the_pin_is_the_content_and_a_changed_bed_is_caught_by_the_plan(tmp_path: Path) -> None:
    bed = tmp_path / "primer.bed"
    bed.write_text(STYLES["artic-v3"])
    pin = pin_primer_bed(str(bed))
    assert pin == content_pin(bed.read_bytes()) and pin.startswith("sha256:")
    assert with_primer_pin({"primer_bed": str(bed), "primer_bed_pin": "sha256:forged"})["primer_bed_pin"] == pin
    assert "primer_bed_pin" not in with_primer_pin({"trim": False, "primer_bed_pin": "sha256:stale"})
    bed.write_text(STYLES["artic-v4.1"])  # fixed in place after the run started
    with pytest.raises(BadInputError, match=r"primer\.bed: the primer BED changed since the run started"):
        load_primer_scheme(str(bed), None, pin)


def test_a_missing_bed_is_bad_input_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"nope\.bed: no such primer BED"):
        pin_primer_bed(str(tmp_path / "nope.bed"))


def _process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "seqlake", "process", *args, "--jobs", "1"], capture_output=True,
                          text=True, check=False)


def test_process_run_id_follows_the_beds_content(reference: Path, tmp_path: Path) -> None:
    """Adding, removing or changing the BED (in place) is another run id; a missing BED or a bad line is 65 with
    one line naming the file (and the line), before anything is written."""
    from seqlake.demo_data import paths

    r1, _, _ = paths()
    v3 = Path(__file__).resolve().parents[1] / "data" / "nCoV-2019.V3.primer.bed"
    bed = tmp_path / "primer.bed"
    bed.write_bytes(v3.read_bytes())
    base = [str(r1), "--reference", str(reference), "--no-allele-counts", "--shards", "1"]

    def run_id(*extra: str) -> str:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        proc = _process(*base, *extra, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        return str(json.loads((out / "summary.json").read_text())["run_id"])

    without = run_id()
    with_bed = run_id("--primer-bed", str(bed))
    bed.write_bytes(v3.read_bytes().replace(b"\t410\t", b"\t411\t", 1))  # one primer fixed in place
    fixed = run_id("--primer-bed", str(bed))
    assert len({without, with_bed, fixed}) == 3
    missing = _process(*base, "--primer-bed", str(tmp_path / "gone.bed"), "--out", str(tmp_path / "never"))
    assert missing.returncode == 65
    assert missing.stderr.strip().splitlines() == [f"seqlake: bad input: {tmp_path / 'gone.bed'}: no such primer BED "
                                                   "(--primer-bed / the run parameter primer_bed)"]
    bed.write_text("MN908947.3\t30\t54\tnCoV-2019_1_LEFT\t1\t+\nMN908947.3\t385\t410\tnCoV-2019_1_RIGHT\t1\t*\n")
    bad = _process(*base, "--primer-bed", str(bed), "--out", str(tmp_path / "never"))
    assert bad.returncode == 65 and f"{bed}:2: primer nCoV-2019_1_RIGHT: strand '*'" in bad.stderr
    assert not (tmp_path / "never").exists()


def test_local_runs_already_processed_check_sees_the_bed(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "home")
    r1 = tmp_path / "r1.fq"
    r1.write_text("@r\nA\n+\nI\n")
    uploads = [(r1, "incoming/s/s.fq")]
    pin = content_pin(b"a BED")
    state.record_run({"run_id": "s-1", "execution_arn": "arn:1", "status": "SUCCEEDED", "started": "t",
                      "inputs": [{"key": "incoming/s/s.fq", "etag": md5_file(r1)}], "reference": "",
                      "status_json": {"parameters": {"primer_bed": "/x/primer.bed", "primer_bed_pin": pin}}})
    assert previous_run(state, uploads, None, {"primer_bed": "/x/primer.bed", "primer_bed_pin": pin}) is not None
    assert previous_run(state, uploads, None, {"primer_bed": "/x/primer.bed",  # changed
                                               "primer_bed_pin": content_pin(b"another BED")}) is None
    assert previous_run(state, uploads, None, {}) is None  # removed


def test_local_run_refuses_a_missing_bed_before_any_upload(tmp_path: Path) -> None:
    from seqlake.cli import main

    r1 = tmp_path / "x_R1.fastq"
    r1.write_text("@r\nACGT\n+\nIIII\n")
    home = tmp_path / "home"
    code = main(["local", "run", str(r1), "--primer-bed", str(tmp_path / "gone.bed"), "--home", str(home)])
    assert code == 65
    assert not (home / "s3").exists() or not any((home / "s3").rglob("*.fastq"))


def test_process_takes_a_params_file_over_its_options(reference: Path, tmp_path: Path) -> None:
    """``--params FILE`` (a params.json, as beside an upload on AWS) sets the run's parameters over the options,
    a relative primer_bed relative to the file; a bad one is 65 naming it, before anything is written."""
    from seqlake.demo_data import paths

    r1, _, _ = paths()
    v3 = Path(__file__).resolve().parents[1] / "data" / "nCoV-2019.V3.primer.bed"
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "scheme.bed").write_bytes(v3.read_bytes())
    params = tmp_path / "cfg" / "params.json"
    params.write_text(json.dumps({"primer_bed": "scheme.bed", "min_length": 33, "no_such": 1}))
    base = [str(r1), "--reference", str(reference), "--no-allele-counts", "--min-length", "25"]
    bad = _process(*base, "--params", str(params), "--out", str(tmp_path / "never"))
    assert bad.returncode == 65 and f"{params}: the document: Additional properties are not allowed" in bad.stderr
    assert not (tmp_path / "never").exists()
    params.write_text(json.dumps({"primer_bed": "scheme.bed", "min_length": 33}))
    ok = _process(*base, "--params", str(params), "--out", str(tmp_path / "out"))
    assert ok.returncode == 0, ok.stderr
    ran = json.loads((tmp_path / "out" / "summary.json").read_text())["parameters"]
    assert ran["min_length"] == 33 and ran["primer_bed"] == str(tmp_path / "cfg" / "scheme.bed")
    assert ran["primer_bed_pin"] == content_pin(v3.read_bytes())


def test_a_primer_bed_or_gff_that_is_not_text_names_its_byte_and_line() -> None:
    """Both text inputs of the plan are decoded by one helper (seqlake.base.errors.decoded_text): a byte that is
    not UTF-8 is bad input naming the file, its line and the byte."""
    from seqlake.base.errors import BadInputError
    from seqlake.plan import gff, primers

    data = b"MN908947.3\t30\t54\tnCoV-2019_1_LEFT\t1\t+\n\xff\xfe\n"
    with pytest.raises(BadInputError, match=r"x.bed:2: not a text BED file: byte \d+"):
        primers.check_primer_bytes("x.bed", data, None)
    with pytest.raises(BadInputError, match=r"x.gff3:2: not a text GFF3 file: byte \d+"):
        gff.check_gff_bytes("x.gff3", b"##gff-version 3\n\xff\n", None)
