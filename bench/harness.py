"""The bench harness: run a command as its own process and measure it, build the input, describe the machine.

Every measured command is a child process, started under ``taskset -c 0`` (one core) unless a row asks
for both cores; its wall time is taken around it (start-up included, for every tool alike) and its peak
memory is the ``ru_maxrss`` that ``wait4`` reports (the largest single process of its tree). A missing
tool, a seqlake piece that does not exist, or a failing command becomes a note on its row, never an
exception: one broken row must not lose the others' numbers. Nothing here asserts a time.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PATHS_PY = BENCH / "paths.py"
#: ``bench/paths.py`` exits with this when a piece of seqlake it needs does not exist (its row is skipped)
EXIT_MISSING = 3
MB = 1e6
#: rows faster than this are repeated (``Ctx.repeat`` times) and the fastest run is kept
REPEAT_BELOW_S = 5.0


# --------------------------------------------------------------------------------------------- results
@dataclass
class Measured:
    seconds: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr_tail: str
    #: user + system CPU of the process and every descendant it waited for
    cpu_seconds: float = 0.0
    #: peak of the process tree's summed PSS (MB), when sampled (:class:`TreeMemory`)
    tree_pss_mb: float | None = None


@dataclass
class Row:
    group: str
    label: str
    command: str
    seconds: float | None = None
    peak_mb: float | None = None
    reads: int | None = None
    plain_bytes: int | None = None
    note: str = ""
    cpu_seconds: float | None = None
    tree_pss_mb: float | None = None

    @property
    def ok(self) -> bool:
        return self.seconds is not None

    def mb_s(self) -> float | None:
        return self.plain_bytes / MB / self.seconds if self.ok and self.plain_bytes and self.seconds else None

    def reads_s(self) -> float | None:
        return self.reads / self.seconds if self.ok and self.reads and self.seconds else None


@dataclass
class Ratio:
    label: str
    value: float | None
    unit: str  # "x" (higher is better), "%" (overhead), "x mem", "s"
    target: str
    met: bool | None
    how: str


@dataclass
class GroupResult:
    """One group's rows and ratios, kept in the work folder so that ``--only`` can rerun a group alone."""

    name: str
    measured: str  # ISO time, UTC
    load: tuple[float, float]
    seconds: float
    rows: list[Row]
    ratios: list[Ratio]
    #: when the ``bench/run.py`` invocation that measured it started: groups of one run share it
    run: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GroupResult:
        return cls(
            d["name"],
            d["measured"],
            (d["load"][0], d["load"][1]),
            d["seconds"],
            [Row(**r) for r in d["rows"]],
            [Ratio(**r) for r in d["ratios"]],
            d.get("run", ""),
        )


def load_results(path: Path) -> dict[str, GroupResult]:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return {k: GroupResult.from_dict(v) for k, v in json.loads(path.read_text()).items()}
    return {}


def save_results(path: Path, groups: dict[str, GroupResult]) -> None:
    path.write_text(json.dumps({k: v.to_dict() for k, v in groups.items()}, indent=1))


# --------------------------------------------------------------------------------------------- input
@dataclass(frozen=True)
class Input:
    r1: Path
    r2: Path
    copies: int
    reads_per_mate: int
    plain_r1: int
    plain_r2: int

    @property
    def plain_total(self) -> int:
        return self.plain_r1 + self.plain_r2


@dataclass(frozen=True)
class Source:
    """The paired reads the input is made from, and how the report names them."""

    r1: Path
    r2: Path
    description: str
    #: the cache folder's name part; empty for the default reads (so their cached copies are reused)
    tag: str = ""

    @classmethod
    def files(cls, r1: Path, r2: Path) -> Source:
        key = json.dumps([[str(p.resolve()), p.stat().st_size] for p in (r1, r2)])
        return cls(r1, r2, f"`{r1.name}` + `{r2.name}`", hashlib.sha256(key.encode()).hexdigest()[:8])


def replica(plain: bytes, k: int) -> bytes:
    """Copy ``k`` of a FASTQ's plain bytes, each read's name ending in ``k`` as three digits (before a ``/1``
    or ``/2``): replicas with the names of the original are one read many times over to whatever pairs mates
    by name (the reducers' overlapping-mates rule walked them as chains). Fixed-width digits keep distinct
    names distinct and an Illumina name Illumina-shaped (its last field stays a number)."""
    lines = plain.split(b"\n")
    digits = b"%03d" % k
    for i in range(0, len(lines) - 3, 4):
        head = lines[i]
        cut = head.find(b" ") if b" " in head else len(head)
        if head[cut - 2 : cut] in (b"/1", b"/2"):
            cut -= 2
        lines[i] = head[:cut] + digits + head[cut:]
    return b"\n".join(lines)


def build_input(work: Path, source: Source, copies: int) -> Input:
    """R1 / R2 decompressed, replicated ``copies`` times (each replica's read names its own:
    :func:`replica`), recompressed with ``gzip -6`` (cached)."""
    # "named": the replicas carry their own names (older caches repeat the names; not reused)
    folder = work / "-".join(filter(None, ["input", "named" if copies > 1 else "", source.tag, f"x{copies}"]))
    meta_path = folder / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        return Input(folder / "R1.fastq.gz", folder / "R2.fastq.gz", copies, **meta)
    folder.mkdir(parents=True, exist_ok=True)
    sizes = []
    reads = 0
    for mate, src in ((1, source.r1), (2, source.r2)):
        plain = read_plain(src)
        reads = plain.count(b"\n") // 4
        target = folder / f"R{mate}.fastq.gz"
        print(f"building {target} ({copies} copies, {len(plain) * copies / MB:.0f} MB plain) ...", flush=True)
        with target.open("wb") as out:
            gz = subprocess.Popen(["gzip", "-6", "-n", "-c"], stdin=subprocess.PIPE, stdout=out)
            assert gz.stdin is not None
            size = 0
            for k in range(copies):
                data = replica(plain, k) if copies > 1 else plain
                gz.stdin.write(data)
                size += len(data)
            gz.stdin.close()
            sizes.append(size)
            if gz.wait() != 0:
                raise RuntimeError(f"gzip failed building {target}")
    meta = {"reads_per_mate": reads * copies, "plain_r1": sizes[0], "plain_r2": sizes[1]}
    meta_path.write_text(json.dumps(meta))
    return Input(folder / "R1.fastq.gz", folder / "R2.fastq.gz", copies, **meta)


def read_plain(src: Path) -> bytes:
    """A FASTQ file's plain bytes, gzip or not."""
    with src.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    with gzip.open(src, "rb") if gzipped else src.open("rb") as f:
        return f.read()


def head_input(work: Path, source: Source, records: int) -> Input:
    """The first ``records`` pairs of the source (all of them when it has fewer), gzip-compressed
    (cached): a small shard."""
    folder = work / "-".join(filter(None, ["input", source.tag, f"head{records}"]))
    folder.mkdir(parents=True, exist_ok=True)
    sizes = []
    for mate, src in ((1, source.r1), (2, source.r2)):
        lines = read_plain(src).split(b"\n")
        records = min(records, len(lines) // 4)
        plain = b"\n".join(lines[: 4 * records]) + b"\n"
        sizes.append(len(plain))
        target = folder / f"R{mate}.fastq.gz"
        if not target.exists():
            target.write_bytes(gzip.compress(plain, mtime=0))
    return Input(folder / "R1.fastq.gz", folder / "R2.fastq.gz", 0, records, sizes[0], sizes[1])


def warm(paths_: Sequence[Path]) -> None:
    """Read the inputs once so that the first timed command does not pay for the disk."""
    for p in paths_:
        with p.open("rb") as f:
            while f.read(1 << 24):
                pass


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------------------------- running
@dataclass
class Ctx:
    """One bench run: where it writes, how it runs commands, and what it has measured so far."""

    work: Path
    quick: bool
    taskset: bool
    env: dict[str, str]
    logs: Path
    reference: Path
    rows: list[Row] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    results: dict[str, Row] = field(default_factory=dict)
    repeat: int = 3

    def prefix(self, cores: int = 1) -> list[str]:
        """Pinned to CPU 0, or to CPUs 0 to ``cores - 1``."""
        return ["taskset", "-c", "0" if cores == 1 else f"0-{cores - 1}"] if self.taskset else []

    def add(self, key: str, row: Row) -> Row:
        self.rows.append(row)
        self.results[key] = row
        return row


def run_measured(ctx: Ctx, key: str, argv: Sequence[str], stdout_devnull: bool = False, pin: bool = True,
                 cores: int = 1, tree_memory: bool = False) -> Measured:
    """Run ``argv`` pinned to core 0 (or ``cores`` cores); wall time and the peak RSS of its largest
    process (KiB -> MB); with ``tree_memory``, also the peak PSS of its whole tree."""
    out_path = ctx.logs / f"{key}.out"
    err_path = ctx.logs / f"{key}.err"
    rss_path = ctx.logs / f"{key}.maxrss"
    rss_path.unlink(missing_ok=True)
    # Linux keeps a process's peak RSS across exec: a command started straight from this process would
    # report this interpreter's peak (~90 MB) as its own; GNU time starts it from a process of 2 MB
    counted = [GNU_TIME, "-f", "%M", "-o", str(rss_path)] if Path(GNU_TIME).exists() else []
    full = [*counted, *(ctx.prefix(cores) if pin else []), *argv]
    with err_path.open("wb") as err, open(os.devnull, "wb") if stdout_devnull else out_path.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, env=ctx.env, cwd=REPO)
        with TreeMemory(proc.pid) if tree_memory else contextlib.nullcontext() as tree:
            _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = "" if stdout_devnull else out_path.read_text(errors="replace")
    lines = [ln for ln in err_path.read_text(errors="replace").splitlines() if ln.strip()]
    cpu = usage.ru_utime + usage.ru_stime
    peak_kib = _gnu_time_maxrss(rss_path) or usage.ru_maxrss
    return Measured(seconds, peak_kib / 1024, proc.returncode, stdout, lines[-1] if lines else "", cpu,
                    tree.peak_mb if tree is not None else None)


#: GNU time, to read a command's own peak RSS (Debian package ``time``); without it, ``wait4``'s figure
GNU_TIME = "/usr/bin/time"


def _gnu_time_maxrss(path: Path) -> int | None:
    """The KiB GNU time wrote (its last line: a command that failed adds a status line before it)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[-1])
    return None


class Sampled:
    """A quantity sampled every ``every`` seconds on a thread while a ``with`` block runs: its peak, and how
    many samples were taken. A sample can miss a peak shorter than ``every``."""

    def __init__(self, every: float) -> None:
        self.every, self.peak, self.samples = every, 0.0, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> float:
        raise NotImplementedError

    def __enter__(self) -> Sampled:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self.peak = max(self.peak, self.sample())
            self.samples += 1


class TreeMemory(Sampled):
    """The peak of a process tree's summed PSS (MB), sampled every 50 ms: what the tree holds in RAM, pages
    shared by forked processes (a child's alignment processes share its index) counted once, where RSS counts
    them in every process."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        super().__init__(every)
        self.pid = pid

    @property
    def peak_mb(self) -> float:
        return self.peak

    def sample(self) -> float:
        return sum(_pss_kib(p) for p in _tree(self.pid)) / 1024


def tree_bytes(root: Path) -> int:
    """The bytes of every file under ``root`` (0 when it is gone); a file that vanishes while walked counts 0."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


class FolderBytes(Sampled):
    """The largest size of a folder (bytes of its files), sampled every ``every`` seconds: a job's scratch."""

    def __init__(self, root: Path, every: float = 1.0) -> None:
        super().__init__(every)
        self.root = root

    def sample(self) -> float:
        return tree_bytes(self.root)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from ``/proc/PID/task/*/children``."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError):
                    todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
    return out


def _pss_kib(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def display(argv: Sequence[str]) -> str:
    """The command as a user would type it (paths shortened to their names)."""
    parts = []
    for a in argv:
        s = str(a)
        if os.sep in s and not s.startswith("-"):
            s = Path(s).name
        parts.append(s)
    return shlex.join(parts).replace("'>'", ">")


def measure(
    ctx: Ctx,
    key: str,
    group: str,
    label: str,
    argv: Sequence[str],
    *,
    reads: int | None,
    plain_bytes: int | None,
    needs: str | None = None,
    stdout_devnull: bool = False,
    shown: str | None = None,
    repeat: bool = True,
    pin: bool = True,
    cores: int = 1,
    before_each: Callable[[], None] | None = None,
    tree_memory: bool = False,
) -> Row:
    """Measure one row; a missing tool or seqlake piece, or a failure, becomes a note, never an exception.
    ``before_each``: called before every run of a repeated row (not timed)."""
    row = ctx.add(key, Row(group, label, shown or display(argv), reads=reads, plain_bytes=plain_bytes))
    if needs is not None and shutil.which(needs) is None:
        row.note = f"skipped: {needs} is not installed"
        print(f"  {label}: {row.note}")
        return row
    print(f"  {label} ...", end="", flush=True)
    prepare = before_each or (lambda: None)
    prepare()
    m = run_measured(ctx, key, argv, stdout_devnull=stdout_devnull, pin=pin, cores=cores)
    runs = 1
    # short rows are the noisiest on a shared machine: repeat them and keep the fastest run
    while repeat and m.returncode == 0 and runs < ctx.repeat and m.seconds < REPEAT_BELOW_S:
        prepare()
        again = run_measured(ctx, key, argv, stdout_devnull=stdout_devnull, pin=pin, cores=cores)
        runs += 1
        if again.returncode != 0 or again.seconds < m.seconds:
            m = again
    if runs > 1:
        row.note = f"best of {runs}"
    if m.returncode == EXIT_MISSING and '"missing"' in m.stdout:
        row.note = "skipped: " + json.loads(m.stdout.strip().splitlines()[-1])["error"]
    elif m.returncode != 0:
        row.note = f"failed (exit {m.returncode}): {m.stderr_tail[:160]}"
    else:
        row.seconds, row.peak_mb, row.cpu_seconds = m.seconds, m.peak_mb, m.cpu_seconds
        if tree_memory:
            # a run of its own, not timed: reading every process's smaps_rollup takes its memory lock and
            # a core's share, which slowed a timed 2-vCPU child by ~8 %
            prepare()
            row.tree_pss_mb = run_measured(ctx, key, argv, stdout_devnull=stdout_devnull, pin=pin, cores=cores,
                                           tree_memory=True).tree_pss_mb
    print(f" {m.seconds:.2f} s, {m.peak_mb:.0f} MB" + (f"  [{row.note}]" if row.note else ""))
    return row


def json_out(ctx: Ctx, key: str) -> dict[str, Any]:
    """The last JSON line a ``bench/paths.py`` row printed (counts, the plan URI)."""
    text = (ctx.logs / f"{key}.out").read_text().strip().splitlines()
    return json.loads(text[-1]) if text else {}


def seqlake(*args: str) -> list[str]:
    return [sys.executable, "-m", "seqlake", *args]


def paths(*args: str) -> list[str]:
    return [sys.executable, str(PATHS_PY), *args]


def measure_worker(ctx: Ctx, key: str, group: str, label: str, inp: Input, *,
                   paired: bool, trim: bool, align: bool, threads: int | None = None,
                   tree_memory: bool = False, run_parameters: Sequence[str] = (),
                   reference: Path | None = None) -> Row:
    """Plan a one-shard run (not timed), then time the worker's real entry point, as AWS Batch runs it;
    ``threads``: as a job with that many vCPUs (``SEQLAKE_THREADS``), not pinned to one core;
    ``run_parameters``: more options of ``bench/paths.py plan`` (``--preset map-ont``); ``reference``: another
    than the bench's."""
    out = fresh(ctx.work / "out" / key)
    args = ["plan", str(out), str(inp.r1)] + ([str(inp.r2)] if paired else []) + ["--shards", "1"]
    args += (["--reference", str(reference or ctx.reference)] if align else []) + ([] if trim else ["--no-trim"])
    args += list(run_parameters)
    m = run_measured(ctx, f"{key}_plan", paths(*args))
    reads = inp.reads_per_mate * (2 if paired else 1)
    size = inp.plain_total if paired else inp.plain_r1
    shown = "python -m seqlake worker --plan PLAN --shard 0"
    if m.returncode != 0:
        row = ctx.add(key, Row(group, label, shown, reads=reads, plain_bytes=size))
        row.note = ("skipped: " if m.returncode == EXIT_MISSING else "plan failed: ") + (
            m.stdout.strip()[-160:] if m.returncode == EXIT_MISSING else m.stderr_tail[:160]
        )
        print(f"  {label}: {row.note}")
        return row
    plan_uri = json_out(ctx, f"{key}_plan")["plan_uri"]
    argv = seqlake("worker", "--plan", plan_uri, "--shard", "0")
    if threads is not None:
        argv, shown = ["env", f"SEQLAKE_THREADS={threads}", *argv], f"SEQLAKE_THREADS={threads} {shown}"
    return measure(ctx, key, group, label, argv, reads=reads, plain_bytes=size, shown=shown,
                   pin=threads is None, before_each=forget_child_work(plan_uri), tree_memory=tree_memory)


def forget_child_work(plan_uri: str) -> Callable[[], None]:
    """Remove what an earlier run of the plan's child left: a child whose manifest already holds its work
    exits at once (as a retried Batch child should), so a repeated row would time that."""

    def forget() -> None:
        from seqlake.base.layout import RunLayout

        shutil.rmtree(RunLayout.of_plan(plan_uri).staging, ignore_errors=True)

    return forget


def speed_ratio(ctx: Ctx, label: str, ours: str, theirs: str, target: float | None, how: str) -> None:
    """Throughput of ``ours`` relative to ``theirs`` on the same input: their time / our time."""
    a, b = ctx.results.get(ours), ctx.results.get(theirs)
    value = b.seconds / a.seconds if a and b and a.seconds and b.seconds else None
    met = None if value is None or target is None else value >= target
    ctx.ratios.append(Ratio(label, value, "x", f">= {target:.2f}x" if target else "", met, how))


def fastest(rows: Sequence[Row], cpu: bool = False) -> float | None:
    """The best wall time (or CPU time) of repeated rows; None unless every repeat succeeded."""
    values = [v for r in rows if (v := (r.cpu_seconds if cpu else r.seconds))]
    return min(values) if values and len(values) == len(rows) else None


# --------------------------------------------------------------------------------------------- machine
def _version(argv: Sequence[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not installed"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        text = (p.stdout or p.stderr).strip().splitlines()
        return text[0] if text else "?"
    return "?"


def _field(path: str, name: str, sep: str = ":") -> str | None:
    """The value of the first ``name<sep>value`` line of a system file such as /proc/cpuinfo."""
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            key, found, value = line.partition(sep)
            if found and key.strip() == name:
                return value.strip()
    return None


def machine() -> dict[str, str]:
    """The facts a reader needs to compare these numbers with their own: CPU, memory, OS, tool versions."""
    cpu = _field("/proc/cpuinfo", "model name") or "?"
    mem_kib = _field("/proc/meminfo", "MemTotal")
    mem = f"{int(mem_kib.split()[0]) / 1024 / 1024:.1f} GiB" if mem_kib else "?"
    pretty = _field("/etc/os-release", "PRETTY_NAME", "=")
    os_name = pretty.strip('"') + f" (kernel {platform.release()})" if pretty else platform.platform()
    version = _version([sys.executable, "-c", "import seqlake; print(seqlake.__version__)"])
    return {
        "CPU": f"{cpu}, {os.cpu_count()} logical CPUs (measurements pinned to CPU 0)",
        "memory": mem,
        "OS": os_name,
        "Python": platform.python_version(),
        "seqlake": f"{version} ({git_state()})",
        "seqkit": _version(["seqkit", "version"]),
        "fastp": _version(["fastp", "--version"]),
        "minimap2": _version(["minimap2", "--version"]),
        "gzip": _version(["gzip", "--version"]),
    }


def git_state() -> str:
    def git(*args: str) -> str | None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            p = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30, check=False)
            return p.stdout.strip() if p.returncode == 0 else None
        return None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return "not a git checkout, or no commit yet"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"commit {commit}" + (", with uncommitted changes" if dirty else "")


# --------------------------------------------------------------------------------------------- declared rows
@dataclass(frozen=True)
class Command:
    """A row that runs one command on the group's input: an external tool, or a path of ``bench/paths.py``.

    ``label``, ``argv`` and ``shown`` may name ``{r1}``, ``{r2}`` (and ``{r1_name}``, ``{r2_name}``),
    ``{ref}``, ``{logs}``, ``{out}`` (a fresh folder of the row's own), ``{plan_shards}`` and ``{python}``.
    ``shown`` (how the report prints the command) defaults to the command with its paths shortened to
    file names.
    """

    key: str
    label: str
    argv: tuple[str, ...]
    shown: str | None = None
    #: the tool that must be on PATH, else the row is skipped with a note
    needs: str | None = None
    to_devnull: bool = False
    #: ``argv`` are the arguments of ``bench/paths.py`` (a seqlake code path), not a command
    seqlake_path: bool = False
    #: run as a job given this many vCPUs: ``SEQLAKE_THREADS`` set, pinned to that many cores
    threads: int | None = None


@dataclass(frozen=True)
class WorkerPath:
    """A row that times the worker's entry point on a one-shard plan of the group's input."""

    key: str
    label: str
    paired: bool
    trim: bool
    align: bool


@dataclass(frozen=True)
class Compare:
    """A speed ratio between two rows of the same input: their time / our time (above 1: seqlake is faster)."""

    label: str
    ours: str
    theirs: str
    target: float | None
    how: str


@dataclass(frozen=True)
class Group:
    """A report section: rows run in order on one input, then the comparisons between them."""

    title: str
    #: 1: the rows read R1 only; 2: both mates
    mates: int
    rows: tuple[Command | WorkerPath, ...]
    compare: tuple[Compare, ...] = ()


def expand(template: str, ctx: Ctx, inp: Input, key: str, **extra: object) -> str:
    values: dict[str, object] = {"r1": inp.r1, "r2": inp.r2, "r1_name": inp.r1.name, "r2_name": inp.r2.name,
                                 "ref": ctx.reference, "logs": ctx.logs, "plan_shards": plan_shards(ctx),
                                 "python": sys.executable, **extra}
    if "{out}" in template:
        values["out"] = fresh(ctx.work / "out" / key)
    if "{r1_bgzf}" in template:
        values["r1_bgzf"] = bgzf_copy(inp.r1)
    return template.format_map(values)


def bgzf_copy(gz: Path) -> Path:
    """The same reads recompressed with ``bgzip`` (BGZF), beside the gzip file (cached); the path alone
    when bgzip is missing (the row that needs it is then skipped)."""
    target = gz.with_name(gz.name.replace(".fastq.gz", ".bgzf.fastq.gz"))
    bgzip = shutil.which("bgzip")
    if target.exists() or bgzip is None:
        return target
    print(f"building {target} (bgzip) ...", flush=True)
    part = target.with_suffix(".part")
    with part.open("wb") as out:
        gunzip = subprocess.Popen(["gzip", "-dc", str(gz)], stdout=subprocess.PIPE)
        done = subprocess.run([bgzip, "-c", "-l", "6", "-@", str(os.cpu_count() or 1)], stdin=gunzip.stdout,
                              stdout=out, check=False)
        if gunzip.wait() != 0 or done.returncode != 0:
            raise RuntimeError(f"building {target} failed")
    part.rename(target)
    return target


def plan_shards(ctx: Ctx) -> int:
    """Shards of the planning row: enough that both files are indexed and cut many times."""
    return 4 if ctx.quick else 64


def run_group(ctx: Ctx, group: Group, inp: Input) -> None:
    """Measure every row of a declared group, then add its comparisons."""
    print(group.title)
    reads = inp.reads_per_mate * group.mates
    size = inp.plain_r1 if group.mates == 1 else inp.plain_total
    for row in group.rows:
        if isinstance(row, WorkerPath):
            measure_worker(ctx, row.key, group.title, row.label, inp, paired=row.paired, trim=row.trim,
                           align=row.align)
            continue
        args = [expand(a, ctx, inp, row.key) for a in row.argv]
        argv = paths(*args) if row.seqlake_path else args
        shown = row.shown and expand(row.shown, ctx, inp, row.key)
        if shown is None and row.seqlake_path:
            shown = "bench/paths.py " + display(args)
        if row.threads is not None:
            argv, shown = ["env", f"SEQLAKE_THREADS={row.threads}", *argv], f"SEQLAKE_THREADS={row.threads} {shown}"
        label = expand(row.label, ctx, inp, row.key)
        measure(ctx, row.key, group.title, label, argv, reads=reads, plain_bytes=size, needs=row.needs,
                stdout_devnull=row.to_devnull, shown=shown, cores=row.threads or 1)
    for c in group.compare:
        speed_ratio(ctx, c.label, c.ours, c.theirs, c.target, c.how)


def measure_interleaved(ctx: Ctx, group: str, commands: Sequence[Command], inp: Input, *, reps: int, pin: bool,
                        where: str, key_suffix: str, **extra: object) -> dict[str, list[Row]]:
    """Each command ``reps`` times, interleaved (a, b, a, b, ...), on both mates of ``inp``.

    Wall time on a shared machine drifts between runs by as much as the differences these pairs are
    measured for; interleaving exposes both commands to the same drift, and the fastest of each is compared.
    """
    rows: dict[str, list[Row]] = {c.key: [] for c in commands}
    for rep in range(1, reps + 1):
        for c in commands:
            key = f"{c.key}{key_suffix}-{rep}"
            argv = [expand(a, ctx, inp, key, **extra) for a in c.argv]
            shown = expand(c.shown, ctx, inp, key, **extra) if c.shown else None
            rows[c.key].append(measure(ctx, key, group, f"{c.label}, {where}, run {rep}", argv,
                                       reads=2 * inp.reads_per_mate, plain_bytes=inp.plain_total, shown=shown,
                                       repeat=False, pin=pin))
    for row in (r for rs in rows.values() for r in rs):
        if row.cpu_seconds:
            row.note = f"CPU {row.cpu_seconds:.1f} s"
    return rows


@dataclass(frozen=True)
class Inputs:
    """The run's input and the same reads at other sizes (for the groups that compare sizes)."""

    work: Path
    source: Source
    main: Input

    def sized(self, copies: int) -> Input:
        return self.main if copies == self.main.copies else build_input(self.work, self.source, copies)

    def head(self, records: int) -> Input:
        return head_input(self.work, self.source, records)
