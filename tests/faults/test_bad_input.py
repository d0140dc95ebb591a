"""Bad input end to end through the local cloud (docs/FAULTS.md, "Bad input").

Every edge-case file of ``tests/data/edge/`` and the cases made here are uploaded at once to one local
cloud; one wait covers all their runs. For each: the run's state, the reason in ``status.json`` and
the ``runs`` table (file and line), no result partition for a failed run, Batch attempts (bad input
is never retried), and the input objects' ETags unchanged. Samplesheets that fail their checks start
no run at all: the start function records them as ``REJECTED`` (``status.json``, the ``runs`` row and
its partition, under the sheet's own run id) with the sheet and line, and logs the same line.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import importlib.util
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from seqlake.aws.events import run_id, s3_object
from seqlake.local.commands import athena_query, runs_command

from .conftest import (
    BARE_GZIP_HEADER,
    EMPTY_INPUTS,
    Outcome,
    by_folder,
    etags,
    fastq_records,
    outcomes,
    partitions_of,
    put,
    runs_row,
    start_function,
    status_of,
)


def _edge_cases() -> list[Any]:
    """The reader-level expectations of every edge file (``tests/core/test_edge_files.py``): one table,
    checked there on the core and here through the whole app."""
    path = Path(__file__).resolve().parents[1] / "core" / "test_edge_files.py"
    spec = importlib.util.spec_from_file_location("_edge_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return list(module.CASES)


EDGE_CASES = _edge_cases()

pytestmark = pytest.mark.e2e  # one xdist worker (GROUPS in tests/conftest.py): one set of bad runs


@dataclass(frozen=True)
class Upload:
    """One case: its objects (key -> body), and what must happen."""

    case: str
    objects: dict[str, bytes]
    succeeds: bool
    #: the reason must contain each of these (a key, ``key:line:``, a phrase)
    reason: tuple[str, ...] = ()
    #: the step that rejects it; "Start" = no run (the start function rejects the event)
    step: str | None = None
    reads: int | None = None
    #: reason lacks a line today: a known gap (docs/FAULTS.md), checked as an expected failure
    gap: str | None = None


SHEET = "sample,fastq_1,fastq_2\n"
ACCEPTED = "incoming/edge-accepted"
ACCEPTED_CASE = "every accepted edge file, as one samplesheet"


def _edge_key(rel: str) -> tuple[str, str]:
    """``cutadapt/multiblock.fastq.bz2`` -> folder ``edge-cutadapt-multiblock-fastq-bz2``, key name
    ``multiblock-fastq-bz2.fastq`` (compression is sniffed from the bytes, so a .bz2/.xz/.bgz file
    uploaded as ``.fastq`` is still read; gzip keeps ``.fastq.gz``, the usual name)."""
    source, name = rel.split("/")
    stem = name.replace(".", "-")
    ext = ".fastq.gz" if name.endswith(".gz") else ".fastq"
    return f"edge-{source}-{stem}", f"{stem}{ext}"


def edge_uploads(edge: Path) -> list[Upload]:
    """A run per rejected file; the accepted files together, as the samples of one samplesheet (the
    sheet's event starts one run, so 17 files cost one plan and one commit)."""
    out = []
    accepted: list[tuple[str, str, str | None, int]] = []  # (sample, fastq_1, fastq_2, reads)
    objects: dict[str, bytes] = {}
    for c in EDGE_CASES:
        folder, name = _edge_key(c.path)
        body = (edge / c.path).read_bytes()
        if c.error is not None:
            key = f"incoming/{folder}/{name}"
            out.append(Upload(c.path, {key: body}, False, (f"{key}:{c.line}: ", c.error), "Plan"))
        elif c.phred64:
            key = f"incoming/{folder}/{name}"
            out.append(Upload(c.path, {key: body}, False, (key, "Phred+64"), "Plan"))
        else:
            objects[f"{ACCEPTED}/{name}"] = body
            accepted.append((folder.removeprefix("edge-"), name, None, c.records))
    d = edge / "cutadapt"
    for sample, r1, r2, reads in (("pair", "paired.1.fastq", "paired.2.fastq", 10),
                                  ("pair-truncated", "paired-truncated.1.fastq", "paired-truncated.2.fastq", 6)):
        objects[f"{ACCEPTED}/{sample}_R1.fastq"] = (d / r1).read_bytes()
        objects[f"{ACCEPTED}/{sample}_R2.fastq"] = (d / r2).read_bytes()
        accepted.append((sample, f"{sample}_R1.fastq", f"{sample}_R2.fastq", reads))
    sheet = SHEET + "".join(f"{s},{r1},{r2 or ''}\n" for s, r1, r2, _ in accepted)
    objects[f"{ACCEPTED}/samplesheet.csv"] = sheet.encode()
    out.append(Upload(ACCEPTED_CASE, objects, True, reads=sum(r for *_, r in accepted)))
    out.append(Upload(
        "cutadapt paired.1 + paired-truncated.2",
        {"incoming/edge-pair-count/pc_R1.fastq": (d / "paired.1.fastq").read_bytes(),
         "incoming/edge-pair-count/pc_R2.fastq": (d / "paired-truncated.2.fastq").read_bytes()},
        False, ("incoming/edge-pair-count/pc_R1.fastq", "different read counts", "has 5 records", "has 3"), "Plan"))
    return out


def _records(n: int, **kw: Any) -> bytes:
    return b"".join(fastq_records(n, **kw))


def _with(records: list[bytes], index: int, record: bytes) -> bytes:
    return b"".join([*records[:index], record, *records[index + 1 :]])




def _truncated_gzip() -> tuple[bytes, str]:
    """The first 2/3 of a gzip file, and the end of its one-line error: the last whole record that
    zlib decodes before the cut (counted from 1, as its last line) and that line."""
    gz = gzip.compress(_records(2000), mtime=0)
    cut = gz[: len(gz) * 2 // 3]
    whole = zlib.decompressobj(31).decompress(cut).count(b"\n") // 4
    assert 0 < whole < 2000
    return cut, (f"t.fastq.gz: gzip stream truncated after record {whole} (line {4 * whole}), "
                 "the last complete record")


def made_uploads() -> list[Upload]:
    recs = fastq_records(6)
    good = b"".join(recs)
    truncated, truncated_reason = _truncated_gzip()
    # > 1 MiB of plain FASTQ: the planner samples the first MiB only, so the worker finds the defect
    big = fastq_records(12_000, length=100)
    late = _with(big, 11_000, b"@r11000\nACGT\n+\nIII\n")
    r2_renamed = b"".join(fastq_records(6, prefix="x"))
    k = "incoming/mk-{}/{}"
    return [
        Upload("quality ' ' (byte 32)", {k.format("qual-space", "q.fastq"): _with(recs, 2, b"@r2\nACGT\n+\nII I\n")},
               False, ("incoming/mk-qual-space/q.fastq:12: ", "outside '!'..'~'"), "Plan"),
        Upload("quality non-ASCII (UTF-8 'é')",
               {k.format("qual-utf8", "q.fastq"): _with(recs, 1, "@r1\nACG\n+\nIIé\n".encode())},
               False, ("incoming/mk-qual-utf8/q.fastq:8: ", "non-ASCII byte 0xc3"), "Plan"),
        Upload("R1/R2 different names",
               {k.format("names", "n_R1.fastq"): good, k.format("names", "n_R2.fastq"): r2_renamed},
               False, ("incoming/mk-names/n_R2.fastq:1: ", "does not match its mate"), "ProcessOneShard"),
        Upload("truncated gzip stream", {k.format("trunc-gz", "t.fastq.gz"): truncated},
               False, (f"incoming/mk-trunc-gz/{truncated_reason}",), "Plan"),
        Upload("bare gzip header (an upload cut short)", {k.format("bare-gz", "h.fastq.gz"): BARE_GZIP_HEADER},
               False, ("incoming/mk-bare-gz/h.fastq.gz: gzip stream truncated before the end of the first record",
                       "gzip header and nothing else"), "Plan"),
        Upload("bad record after the first MiB (bz2)", {k.format("late", "late.fastq"): bz2.compress(late)},
               False, ("incoming/mk-late/late.fastq:44004: ", "quality has 3 characters but the sequence has 4"),
               "ProcessOneShard"),
        Upload("key with spaces and non-ASCII folder", {"incoming/mk run ü 1/reads.fastq": good}, True, reads=6),
        Upload("file name with a space", {"incoming/mk-space/my reads.fastq": good}, False,
               ("my reads.fastq", "invalid sample name"), "Plan"),
        *(Upload(f"empty input: {kind}", {k.format(f"empty-{n}", "e.fastq.gz" if body else "e.fastq"): body},
                 True, reads=0) for n, (kind, body) in enumerate(EMPTY_INPUTS.items())),
        Upload("samplesheet missing column", {k.format("sheet-cols", "samplesheet.csv"): b"sample,fastq_2\ns,a.fq\n"},
               False, ("incoming/mk-sheet-cols/samplesheet.csv:1: ", "missing column 'fastq_1'"), "Start"),
        Upload("samplesheet sample mixing paired and single-end rows",
               {k.format("sheet-dup", "samplesheet.csv"): (SHEET + "s,a.fastq,\ns,b_1.fastq,b_2.fastq\n").encode()},
               False, ("incoming/mk-sheet-dup/samplesheet.csv:3: ", "mixes paired-end and single-end"), "Start"),
        Upload("samplesheet path with '..'",
               {k.format("sheet-dots", "samplesheet.csv"): (SHEET + "s,../mk-late/late.fastq,\n").encode()},
               False, ("incoming/mk-sheet-dots/samplesheet.csv:2: ", "'..'"), "Start"),
        Upload("samplesheet path in another bucket",
               {k.format("sheet-other", "samplesheet.csv"): (SHEET + "s,s3://someone-elses-bucket/r.fastq,\n").encode()},
               False, ("incoming/mk-sheet-other/samplesheet.csv:2: ", "someone-elses-bucket"), "Start"),
    ]


@dataclass
class BadInputRuns:
    cases: list[Upload]
    before: dict[str, str]
    after: dict[str, str]
    results: dict[str, Outcome]
    start_log: str


@pytest.fixture(scope="module")
def bad_runs(cloud: LocalCloud, edge: Path) -> BadInputRuns:
    cases = edge_uploads(edge) + made_uploads()
    before: dict[str, str] = {}
    for c in cases:
        if c.case == ACCEPTED_CASE:
            # the files before their sheet, with the trigger paused: then the sheet's one event
            # finds them all and starts one run
            *files, sheet = c.objects.items()
            with cloud.events_paused():
                for key, body in files:
                    before[key] = put(cloud, key, body)
            before[sheet[0]] = put(cloud, *sheet)
            continue
        for key, body in c.objects.items():
            before[key] = put(cloud, key, body)
    results = by_folder(outcomes(cloud, cloud.wait(timeout=600)))
    after = {k: v.strip('"') for k, v in etags(cloud, list(before)).items()}
    assert cloud.lambdas is not None
    logs = cloud.state.logs_dir / "lambda" / start_function(cloud)
    start_log = "\n".join(p.read_text(errors="replace") for p in sorted(logs.glob("*.log")))
    return BadInputRuns(cases, before, after, results, start_log)


def _find(bad_runs: BadInputRuns, case: str) -> Upload:
    return next(c for c in bad_runs.cases if c.case == case)


def _why(o: Outcome) -> dict[str, object]:
    """What a run that ended otherwise than expected says of itself: its status and its execution's end."""
    e = o.execution
    return {"state": o.status.get("state"), "reason": o.status.get("reason"), "failed_step": o.status.get(
        "failed_step"), "execution": e.status, "error": e.error, "cause": (e.cause or "")[:2000], "states": e.states}


def _check(bad_runs: BadInputRuns, cloud: LocalCloud, case: str) -> None:
    c = _find(bad_runs, case)
    folder = next(iter(c.objects)).split("/")[1]
    # the inputs are never modified
    assert {k: bad_runs.after[k] for k in c.objects} == {k: bad_runs.before[k] for k in c.objects}
    if c.step == "Start":
        assert folder not in bad_runs.results, "a rejected samplesheet must start no run"
        line = next((ln for ln in bad_runs.start_log.splitlines() if c.reason[0] in ln), "")
        for part in c.reason:
            assert part in line, (part, line)
        _check_rejected(bad_runs, cloud, c)
        return
    o = bad_runs.results[folder]
    st = o.status
    if c.succeeds:
        assert o.execution.status == "SUCCEEDED", (case, _why(o))
        assert st["state"] == "SUCCEEDED" and st["reads"] == c.reads
        assert "qc_summary" in o.partitions
        return
    assert o.execution.status == "FAILED", (case, _why(o))
    assert st["state"] == "FAILED" and st["failed_step"] == c.step, (case, _why(o))
    for part in c.reason:
        assert part in st["reason"], (part, st["reason"])
    # the runs table says the same; no result table has the failed run
    assert o.partitions == frozenset({"runs"})
    row = runs_row(cloud, o.run_id)
    assert row["state"] == "FAILED" and row["reason"] == st["reason"]
    if c.step == "ProcessOneShard":  # one child: a plain Batch job
        # exit 65 is not retried: one attempt, and the log stream is recorded
        assert [a.retries for a in o.execution.arrays] == [0]
        assert st["failed_shard"] == 0 and st["log_stream"] and "exit code 65" in st["reason"]
        assert st["retried_shards"] == []
    else:
        assert o.execution.arrays == [], "bad input found by the planner must never reach Batch"


def rejected_run_id(bad_runs: BadInputRuns, cloud: LocalCloud, c: Upload) -> str:
    """The run id of a rejected sheet: its folder, and the sheet's bucket, key and ETag as uploaded."""
    [key] = c.objects
    return run_id(key.split("/")[1], [s3_object(cloud.bucket, key, bad_runs.before[key])])


def _check_rejected(bad_runs: BadInputRuns, cloud: LocalCloud, c: Upload) -> None:
    """status.json and the runs row (local Athena) say REJECTED with the sheet's line; only ``runs``
    has a partition of it."""
    [key] = c.objects
    rid = rejected_run_id(bad_runs, cloud, c)
    st = status_of(cloud, rid)
    assert st["state"] == "REJECTED" and st["failed_step"] == "Start", st
    assert st["reason"].startswith(f"s3://{cloud.bucket}/{c.reason[0]}"), st["reason"]
    for part in c.reason:
        assert part in st["reason"], (part, st["reason"])
    assert [(i["key"], i["etag"]) for i in st["inputs"]] == [(key, bad_runs.before[key])]
    row = runs_row(cloud, rid)
    assert row["state"] == "REJECTED" and row["reason"] == st["reason"] and row["shards"] is None
    assert partitions_of(cloud, rid) == frozenset({"runs"})


def test_rejected_inputs_are_in_the_runs_table(bad_runs: BadInputRuns, cloud: LocalCloud) -> None:
    result = athena_query(cloud, "SELECT run_id, inputs FROM runs WHERE state = 'REJECTED'")
    ours = {rid for rid, inputs in result.rows if any(k in (inputs or "") for k in bad_runs.before)}
    assert ours == {rejected_run_id(bad_runs, cloud, c) for c in bad_runs.cases if c.step == "Start"}


def test_local_runs_lists_the_rejected_inputs(bad_runs: BadInputRuns, cloud: LocalCloud,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert runs_command(argparse.Namespace(home=cloud.state.root)) == 0
    out = capsys.readouterr().out
    for c in bad_runs.cases:
        if c.step == "Start":
            rid = rejected_run_id(bad_runs, cloud, c)
            line = next((ln for ln in out.splitlines() if rid in ln), "")
            assert "REJECTED" in line and "BadInputError" in line, (rid, out)


def test_every_edge_file_has_a_case(edge: Path) -> None:
    on_disk = {str(p.relative_to(edge)) for p in edge.rglob("*") if p.is_file()}
    assert on_disk == {c.path for c in EDGE_CASES}


@pytest.mark.parametrize("case", [c.path for c in EDGE_CASES if c.error or c.phred64]
                         + ["cutadapt paired.1 + paired-truncated.2"])
def test_rejected_edge_file_end_to_end(bad_runs: BadInputRuns, cloud: LocalCloud, case: str) -> None:
    _check(bad_runs, cloud, case)


def test_accepted_edge_files_end_to_end(bad_runs: BadInputRuns, cloud: LocalCloud) -> None:
    _check(bad_runs, cloud, ACCEPTED_CASE)
    # each file's reads, per sample and mate, as the reader-level table says
    run_id = bad_runs.results["edge-accepted"].run_id
    result = athena_query(cloud, f"SELECT sample, mate, reads FROM qc_summary WHERE run_id = '{run_id}' "
                                 "AND stage = 'raw' ORDER BY sample, mate")
    got = {(s, int(m)): int(r) for s, m, r in result.rows if s and m and r}
    want = {}
    for c in EDGE_CASES:
        if c.error is None and not c.phred64:
            want[(_edge_key(c.path)[0].removeprefix("edge-"), 1)] = c.records
    want.update({("pair", 1): 5, ("pair", 2): 5, ("pair-truncated", 1): 3, ("pair-truncated", 2): 3})
    assert got == want


def _made_params() -> list[Any]:
    # a known gap is a strict expected failure: fixing it turns the test red until the mark goes
    return [pytest.param(c.case, marks=pytest.mark.xfail(strict=True, reason=c.gap)) if c.gap else c.case
            for c in made_uploads()]


@pytest.mark.parametrize("case", _made_params())
def test_made_case_end_to_end(bad_runs: BadInputRuns, cloud: LocalCloud, case: str) -> None:
    _check(bad_runs, cloud, case)


def test_no_run_for_a_rejected_input_is_half_visible(bad_runs: BadInputRuns) -> None:
    for o in bad_runs.results.values():
        if o.status["state"] == "FAILED":
            assert o.partitions == frozenset({"runs"}), o.run_id
