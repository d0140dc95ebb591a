"""One contract for every command: the options several commands take are the same options (name, default,
help), every command has a description, and every command exits 65 on bad input with one line and no
traceback. The cases that need no cloud run in this process (``cli.main``); the local cloud's own (a run
that fails on a cut gzip, its re-run) run the real console script.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seqlake.base.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE
from seqlake.cli import COMMAND_OPTIONS, build_parser, main

REPO = Path(__file__).resolve().parents[2]


def subcommands(parser: argparse.ArgumentParser,
                path: str = "seqlake") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from subcommands(sub, f"{path} {name}")


def options(command: str) -> dict[str, argparse.Action]:
    parser = dict(subcommands(build_parser()))[f"seqlake {command}"]
    return {s: a for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def same(a: argparse.Action, b: argparse.Action) -> bool:
    return (a.dest, a.default, a.help, a.type, a.nargs, a.metavar, type(a)) == (
        b.dest, b.default, b.help, b.type, b.nargs, b.metavar, type(b))


# -- the options ----------------------------------------------------------------------------------------

def test_process_and_local_run_take_the_same_options_alike() -> None:
    process, local = options("process"), options("local run")
    differing = [flag for flag in process.keys() & local.keys() if not same(process[flag], local[flag])]
    assert differing == []
    # what only one of them takes, each for a reason its help gives
    assert sorted(process.keys() - local.keys()) == ["--out", "--shards"]
    assert sorted(local.keys() - process.keys()) == ["--containers", "--home", "--index-memory", "--no-iam",
                                                     "--no-memory-limits", "--reducer-memory", "--worker-memory"]
    positionals = [[a.dest for a in dict(subcommands(build_parser()))[f"seqlake {c}"]._actions
                    if not a.option_strings] for c in ("process", "local run")]
    assert positionals[0] == positionals[1] == ["r1", "r2"]


def test_the_execution_options_are_one_definition_in_every_command_that_takes_them() -> None:
    for option in ("--jobs", "--threads", "--reads-per-shard", "--home", "--containers", "--no-iam",
                   "--no-memory-limits", "--worker-memory", "--index-memory", "--reducer-memory"):
        takers = [c for c, flags in COMMAND_OPTIONS.items() if option in flags]
        actions = [options(c)[option] for c in takers]
        assert all(same(actions[0], a) for a in actions), option
    assert {"--jobs", "--threads"} <= options("local rerun").keys()


def test_every_command_has_a_description() -> None:
    missing = [path for path, p in subcommands(build_parser()) if not p.description]
    assert missing == []


# -- bad input: exit 65, one line, no traceback --------------------------------------------------------

def seqlake(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def one_bad_input_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("seqlake:")]
    assert len(lines) == 1 and lines[0].startswith("seqlake: bad input: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A state folder with one finished run whose report is rendered (what `local report` reads)."""
    root = tmp_path / "home"
    run = root / "s3" / "bucket" / "runs" / "r-0123456789abcdef"
    run.mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({"run_id": "r-0123456789abcdef", "state": "SUCCEEDED"}))
    page = root / "s3" / "bucket" / "reports" / "r-0123456789abcdef" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>")
    (root / "catalog.json").write_text("[]")
    return root


def sheet(tmp_path: Path, rows: str) -> Path:
    (tmp_path / "a.fastq").write_text("@r1\nACGT\n+\nIIII\n")
    path = tmp_path / "my_sheet.csv"
    path.write_text("sample,fastq_1,fastq_2,control\n" + rows)
    return path


BAD_INPUT: dict[str, Any] = {
    # command -> a function of (tmp_path, home) giving the argv of a bad input and what the line names
    "process": lambda t, h: (["process", str(t / "missing_R1.fastq"), "--out", str(t / "o")], "missing_R1.fastq"),
    "local run": lambda t, h: (["local", "run", "--samplesheet", str(sheet(t, "A,a.fastq,,yes\n")), "--home",
                                str(h)], "my_sheet.csv:2"),
    "local query": lambda t, h: (["local", "query", "SELECT nothing FROM no_table", "--home", str(h)], "SQL"),
    "local runs": None,  # reads the state folder only; no input of the user's to be wrong
    "local report": lambda t, h: (["local", "report", "zz-no-such-run", "--home", str(h)], "zz-no-such-run"),
    "local status": lambda t, h: (["local", "status", "zz-no-such-run", "--home", str(h)], "zz-no-such-run"),
    "local rerun": lambda t, h: (["local", "rerun", "zz-no-such-run", "--home", str(h)], "zz-no-such-run"),
    "local delete-sample": lambda t, h: (["local", "delete-sample", "zz-no-such-sample", "--yes", "--home", str(h)],
                                         "zz-no-such-sample"),
    "local compact": None,  # rewrites the state folder's tables: no input of the user's to be wrong
    "worker": None,  # test_worker_exits_65_on_bad_input_of_its_shard below
    "reduce": None,  # reads only what the run's children wrote: no input of the user's to be wrong
    "demo": None,  # its input is bundled
    "local": None,  # a group of commands
}


def test_every_command_has_a_bad_input_case() -> None:
    assert {p.removeprefix("seqlake ") for p, _ in subcommands(build_parser())} == set(BAD_INPUT)


@pytest.mark.parametrize("command", [c for c, case in BAD_INPUT.items() if case is not None])
def test_every_command_exits_65_on_bad_input(command: str, tmp_path: Path, home: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    argv, names = BAD_INPUT[command](tmp_path, home)
    code, err = seqlake(argv, capsys)
    assert code == EXIT_BAD_INPUT, err
    assert names in one_bad_input_line(err)


def test_worker_exits_65_on_bad_input_of_its_shard(tmp_path: Path) -> None:
    from seqlake.base.model import Sample
    from seqlake.plan.planner import make_plan

    reads = tmp_path / "x.fastq"
    reads.write_text("".join(f"@r{i}\nACGTACGTAC\n+\nIIIIIIIIII\n" for i in range(40)))
    plan = make_plan("w", [Sample("x", str(reads))], out_prefix=str(tmp_path / "out"))
    st = reads.stat()
    reads.write_bytes(reads.read_bytes().replace(b"@r33\n", b"Xr33\n"))  # same size and mtime: the plan fits
    os.utime(reads, ns=(st.st_atime_ns, st.st_mtime_ns))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "seqlake", "worker", "--plan", plan.plan_uri, "--shard", "0"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert f"{reads}:133:" in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_state_folder_is_bad_input_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["local", "query", "--named", "qc_overview"], ["local", "report", "x"], ["local", "status", "x"],
                 ["local", "rerun", "x"], ["local", "delete-sample", "x", "--yes"], ["local", "compact"]):
        code, err = seqlake([*argv, "--home", str(tmp_path / "nowhere")], capsys)
        assert code == EXIT_BAD_INPUT and "nowhere: no local cloud here" in one_bad_input_line(err)


def test_arguments_that_do_not_go_together_are_a_usage_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["process", "--out", str(tmp_path)], ["local", "run", "--home", str(tmp_path)],
                 ["process", "a.fq", "--samplesheet", "s.csv", "--out", str(tmp_path)]):
        code, err = seqlake(argv, capsys)
        assert code == EXIT_USAGE and err.startswith("seqlake: usage: ") and "Traceback" not in err


# -- the numbered problems of issue 26 ------------------------------------------------------------------

def test_report_open_works_with_a_relative_home(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """(1) the default home, ./.seqlake, is relative: the page must still become a file:// URI."""
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    monkeypatch.chdir(home.parent)
    code = main(["local", "report", "r-0123", "--open", "--home", home.name])
    out = capsys.readouterr()
    assert code == EXIT_OK, out.err
    page = home / "s3" / "bucket" / "reports" / "r-0123456789abcdef" / "index.html"
    assert opened == [page.as_uri()] and out.out.strip() == str(page)


def test_process_takes_a_samplesheet_writes_a_report_and_out_is_the_lake(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """(3) --samplesheet, a report, and --out DIR holding the lake (results/, reports/) as its help says."""
    edge = REPO / "tests" / "data" / "edge"
    for name in ("cutadapt/paired.1.fastq", "cutadapt/paired.2.fastq", "biopython/example.fastq"):
        (tmp_path / Path(name).name).write_bytes((edge / name).read_bytes())
    csv = tmp_path / "samplesheet.csv"
    csv.write_text("sample,fastq_1,fastq_2\npaired,paired.1.fastq,paired.2.fastq\nsingle,example.fastq,\n")
    out = tmp_path / "out"
    code = main(["process", "--samplesheet", str(csv), "--out", str(out), "--jobs", "1"])
    err = capsys.readouterr().err
    assert code == EXIT_OK, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["samples"] == ["paired", "single"]
    assert (out / "results" / "sample_summary" / f"run_id={summary['run_id']}").is_dir()
    assert (out / "reports" / summary["run_id"] / "index.html").is_file()
    assert "DIR/results/<table>/" in options("process")["--out"].help  # type: ignore[operator]
    # a sheet given where a FASTQ goes is named as what it is
    code, err = seqlake(["process", str(csv), "--out", str(tmp_path / "o2")], capsys)
    assert code == EXIT_BAD_INPUT and "--samplesheet" in one_bad_input_line(err)


def test_process_checks_the_reference_before_it_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """(4) a missing or non-FASTA reference: one line, exit 65, nothing planned."""
    reads = REPO / "tests" / "data" / "edge" / "cutadapt" / "paired.1.fastq"
    (tmp_path / "reads.fasta").write_bytes(reads.read_bytes())
    for reference, problem in (("missing.fasta", "no such file"), ("reads.fasta", "not a FASTA reference")):
        out = tmp_path / f"out-{reference}"
        code, err = seqlake(["process", str(reads), "--reference", str(tmp_path / reference), "--out", str(out)],
                            capsys)
        assert code == EXIT_BAD_INPUT and problem in one_bad_input_line(err)
        assert not (out / "runs").exists()


def test_local_runs_shows_a_run_once_with_its_attempts_and_counts_reads_as_reads(tmp_path: Path) -> None:
    """(7, 10) a run and its re-runs are one line; the reads column says it counts every mate."""
    from rich.console import Console

    from seqlake.local.commands import by_run, print_runs

    records = [{"run_id": "a", "status": "FAILED", "started": "2026-12-01T10:00:00Z", "status_json": {}},
               {"run_id": "b", "status": "SUCCEEDED", "started": "2026-12-01T10:01:00Z",
                "status_json": {"reads": 11524}},
               {"run_id": "a", "status": "SUCCEEDED", "started": "2026-12-01T10:02:00Z",
                "status_json": {"reads": 200}}]
    assert [(r["run_id"], r["status"], r["attempts"], r["started"]) for r in by_run(records)] == [
        ("a", "SUCCEEDED", 2, "2026-12-01T10:00:00Z"), ("b", "SUCCEEDED", 1, "2026-12-01T10:01:00Z")]
    console = Console(file=(tmp_path / "out.txt").open("w"), width=200)
    print_runs(console, records)
    console.file.close()
    text = (tmp_path / "out.txt").read_text()
    assert "reads (all mates)" in text and "11,524" in text and text.count("│ a ") == 1


def test_the_report_shows_raw_pairs_beside_pairs_kept() -> None:
    """(7) "Reads 11,524" beside "Pairs kept 5,740" read like half the data lost."""
    from seqlake.report.data import SUMMARY_COLUMNS

    titles = {c.key: c.title for c in SUMMARY_COLUMNS}
    assert titles["pairs"] == "Pairs" and "Pairs kept" in titles.values() and "mates" in titles["reads"]


@pytest.mark.e2e
def test_bad_input_on_the_local_cloud_exits_65_and_a_fixed_file_is_a_new_run(tmp_path: Path) -> None:
    """(2, 5) a cut gzip: `local run` exits 65 saying a new upload is a new run; `local rerun` of it unchanged
    refuses (65) without starting anything; once the file is fixed in place, `local rerun` starts a new run
    that records the new file's ETag, and the failed run keeps the one it read."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "seqlake", *args, "--home", str(tmp_path / "home")], env=env,
                              capture_output=True, text=True, timeout=600, check=False)

    whole = gzip.compress(b"".join(b"@r%d\nACGTACGTAC\n+\nIIIIIIIIII\n" % i for i in range(4000)), mtime=0)
    reads = tmp_path / "cut.fastq.gz"
    reads.write_bytes(whole[: len(whole) // 2])
    failed = run("local", "run", str(reads))
    assert failed.returncode == EXIT_BAD_INPUT, failed.stderr[-3000:]
    assert "a new upload starts a new run" in " ".join(failed.stderr.split())
    (first,) = json.loads((tmp_path / "home" / "runs.json").read_text())
    again = run("local", "rerun", first["run_id"])
    assert again.returncode == EXIT_BAD_INPUT and "failed on bad input" in again.stderr
    assert len(json.loads((tmp_path / "home" / "runs.json").read_text())) == 1  # nothing started
    reads.write_bytes(whole)
    fixed = run("local", "rerun", first["run_id"])
    assert fixed.returncode == EXIT_OK, fixed.stderr[-3000:]
    runs = json.loads((tmp_path / "home" / "runs.json").read_text())
    assert [(r["run_id"] == first["run_id"], r["status"]) for r in runs] == [(True, "FAILED"), (False, "SUCCEEDED")]
    from localcloud.state import md5_file

    assert runs[0]["inputs"] == first["inputs"]
    assert [i["etag"].strip('"') for i in runs[1]["inputs"]] == [md5_file(reads)]
