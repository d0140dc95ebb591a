"""Lambda's and Batch's memory, enforced locally as AWS enforces it.

On AWS a Lambda invocation that uses more than its function's ``MemorySize`` is killed
(``Runtime.OutOfMemory``), and a Batch container that uses more than its job's ``MEMORY`` is killed by
the kernel (``OutOfMemoryError: Container killed due to memory usage``, exit code 137). What counts is
what the kernel charges the sandbox or the container: the resident memory of every process in it (its
children included) and the page cache of the files it writes, not address space. Locally each
invocation and each Batch attempt gets a memory cgroup of its own with that limit, made under this
process's own cgroup (v2 where the memory controller is delegated to it, else v1's memory hierarchy):
the kernel kills it as AWS's would, and the cgroup's counters say that it did (``oom_kill``) and how
much was used at most (the ``Max Memory Used`` of the REPORT line). The process is in its cgroup before its
first instruction (:mod:`.launcher`, :func:`.forkserver.confine`): v1 leaves what a process allocated before
it moved charged to the cgroup it came from, so a job moved in just after its start was charged less than it
used (32 MiB allocated, 24 charged).

Where no hierarchy is writable (an unprivileged CI runner), the child limits its own data segment
instead (``RLIMIT_DATA``: the private writable memory, the nearest rlimit to resident memory;
``RLIMIT_AS`` counts every reserved address range, far more than is resident for numpy, pyarrow and
threads' stacks): an allocation past it raises ``MemoryError``, which a Lambda invocation reports as
``Runtime.OutOfMemory``. It caps each process, not a process tree, and the peak is the process's own
(``VmHWM``, or its largest child's ``ru_maxrss``), written when a Python function the launcher runs ends; a
command's is unknown (its ``ru_maxrss`` keeps the launching process's peak across ``fork`` and ``exec``).

Not charged to a cgroup: a child forked from the fork server (:mod:`.forkserver`) shares the pages of the
libraries the server imported (boto3, pyarrow, numpy, mappy: about 100 MB resident), which were charged
to the server when it imported them; the cgroup counts what the invocation allocates itself. On Lambda
the same imports are part of the function's memory, so the local limit is looser by about that much.

The cgroup's peak counts the page cache of the files an attempt reads and writes, which the kernel
reclaims at the limit instead of killing: a child that downloads a 4.75 GB index and spills 8.4 GB of runs
peaks at its limit without being short of memory. So a Batch attempt's anonymous and shared memory (what
the kernel cannot reclaim without swap, so what decides a kill) is also sampled from the moment it runs in its
cgroup (:meth:`Cap.watch`), and once more by the process itself as it ends where it is a function the
launcher runs (a forked child that runs for milliseconds may start and end between two samples of a loaded
machine: 1 run in 20 of the memory test saw none), and its largest sample recorded beside the peak. (The
cgroup's usage less its inactive file cache, ``docker stats``' figure, is no measure here: pages taken off
the list while the kernel reclaims them count as used, and a process writing a file at its limit read near
the limit.)

The app's memory-limits setting (:attr:`.contract.Settings.memory_limits`; seqlake's ``--no-memory-limits``
sets it) at ``0`` turns the limits off.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from localcloud import contract
from localcloud.aws_texts import LAMBDA_OUT_OF_MEMORY
from localcloud.forkserver import JOIN_CGROUP, LIMIT_DATA, PEAK_FILE, RESIDENT_COUNTERS, RESIDENT_FILE

#: where the cgroup file systems are mounted
CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1 << 20

Mode = Literal["cgroup2", "cgroup1", "rlimit", "off"]
_parents = itertools.count(1)


def var() -> str:
    """The setting's name (the app's): ``0`` leaves Lambda's and Batch's memory unlimited locally."""
    return contract.app().settings.memory_limits


def enabled(env: dict[str, str] | None = None) -> bool:
    """Memory limits are on unless the setting is ``0``."""
    return (os.environ if env is None else env).get(var(), "1") != "0"


def apply_flag(no_memory_limits: bool) -> None:
    """``--no-memory-limits``: the setting for this process and the local cloud's children."""
    if no_memory_limits:
        os.environ[var()] = "0"


def _own_cgroup(version: Literal[1, 2]) -> Path | None:
    """This process's cgroup folder in the v2 hierarchy, or in v1's memory hierarchy."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if version == 2 and controllers == "" and (CGROUP_ROOT / "cgroup.controllers").is_file():
            return CGROUP_ROOT / path.lstrip("/")
        if version == 1 and "memory" in controllers.split(","):
            return CGROUP_ROOT / "memory" / path.lstrip("/")
    return None


def _writable_parent(version: Literal[1, 2]) -> Path | None:
    """A cgroup of ours under this process's own, for the invocations' cgroups; None if the kernel or
    our rights do not allow one."""
    own = _own_cgroup(version)
    if own is None or not own.is_dir():
        return None
    parent = own / f"localcloud-{os.getpid()}-{next(_parents)}"
    try:
        parent.mkdir()
        if version == 2:  # the memory controller enabled for our cgroup's children, then for ours'
            if "memory" not in (own / "cgroup.subtree_control").read_text().split():
                (own / "cgroup.subtree_control").write_text("+memory")
            (parent / "cgroup.subtree_control").write_text("+memory")
        elif not (parent / "memory.limit_in_bytes").is_file():
            raise OSError("no memory controller")
    except OSError:
        with contextlib.suppress(OSError):
            parent.rmdir()
        return None
    return parent


#: seconds between two samples of an attempt's anonymous and shared memory (:meth:`Cap.watch`), at most
SAMPLE_SECONDS = 1.0
#: seconds between its first two samples: the gap doubles up to :data:`SAMPLE_SECONDS`, so a short attempt
#: is sampled often and a long one once a second
FIRST_SAMPLE_GAP = 0.005


@dataclass
class Cap:
    """One invocation's or attempt's limit: what its process applies to itself (:attr:`confinement`, for
    :class:`.launcher.Program`), then, once it has ended, whether the limit ended it and its peak."""

    mode: Mode
    limit_mib: int
    #: its cgroup (cgroup modes)
    cgroup: Path | None = None
    #: where the process writes its peak when it ends (rlimit mode)
    peak_file: Path | None = None
    #: where a function the launcher runs writes its cgroup's resident memory when it ends (cgroup modes)
    resident_file: Path | None = None
    #: the largest sample of its anonymous and shared memory, in bytes (:meth:`watch`)
    _resident_peak: int = field(default=0, repr=False)
    _sampler: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def confinement(self) -> dict[str, Any] | None:
        """For :func:`.forkserver.confine` in the child (None: nothing to apply)."""
        if self.cgroup is not None:
            return {JOIN_CGROUP: str(self.cgroup / "cgroup.procs"), RESIDENT_FILE: str(self.resident_file or ""),
                    RESIDENT_COUNTERS: list(self._resident_counters())}
        if self.mode == "rlimit":
            return {LIMIT_DATA: self.limit_mib * MIB, PEAK_FILE: str(self.peak_file)}
        return None

    def killed(self) -> bool:
        """The kernel killed a process of this cgroup for its memory."""
        if self.cgroup is None:
            return False
        return _counter(self.cgroup / ("memory.events" if self.mode == "cgroup2" else "memory.oom_control"),
                        "oom_kill") > 0

    def out_of_memory(self, error_type: str | None) -> bool:
        """The limit ended it: the kernel killed it, or (rlimit) an allocation failed (``MemoryError``)."""
        return self.killed() or (self.mode == "rlimit" and error_type == "MemoryError")

    def peak_mib(self) -> int | None:
        """The most memory it used, in MiB (rounded up), where this machine can tell."""
        with contextlib.suppress(OSError, ValueError):
            if self.cgroup is not None:
                name = "memory.peak" if self.mode == "cgroup2" else "memory.max_usage_in_bytes"
                return math.ceil(int((self.cgroup / name).read_text().split()[0]) / MIB)
            if self.peak_file is not None:
                return math.ceil(int(self.peak_file.read_text()) / 1024)
        return None

    def watch(self) -> None:
        """Sample the cgroup's anonymous and shared memory until :meth:`resident_peak_mib` or :meth:`close`
        (cgroup modes only): at once (the caller starts watching once the process runs in its cgroup, see
        :class:`.launcher.Launcher`: its first pages are there), then after :data:`FIRST_SAMPLE_GAP`, the gap
        doubling up to :data:`SAMPLE_SECONDS`, and once more when sampling stops (what its children left)."""
        if self.cgroup is None:
            return
        stat = self.cgroup / "memory.stat"
        names = self._resident_counters()

        def take() -> None:
            self._resident_peak = max(self._resident_peak, sum(_counter(stat, name) for name in names))

        def sample() -> None:
            gap = FIRST_SAMPLE_GAP
            while not self._stop.wait(gap):
                take()
                gap = min(gap * 2, SAMPLE_SECONDS)
            take()

        take()  # here, not in the thread: a thread may start after a short process has ended
        self._sampler = threading.Thread(target=sample, daemon=True, name="memory-sampler")
        self._sampler.start()

    def resident_peak_mib(self) -> int | None:
        """Stop sampling; the largest sample of its anonymous and shared memory, in MiB (rounded up; None if
        it was not sampled)."""
        if self._sampler is None:
            return None
        self._stop.set()
        self._sampler.join()
        own = 0  # the last sample, taken by the process itself at its end (forkserver.write_peak)
        if self.resident_file is not None:
            with contextlib.suppress(OSError, ValueError):
                own = int(self.resident_file.read_text())
        return math.ceil(max(self._resident_peak, own) / MIB)

    def _resident_counters(self) -> tuple[str, ...]:
        """The ``memory.stat`` counters of its anonymous and shared memory."""
        return ("anon", "shmem") if self.mode == "cgroup2" else ("total_rss", "total_shmem")

    def close(self) -> None:
        """Remove the cgroup (killing what is left in it: an alignment process outliving its worker)."""
        for written in (self.peak_file, self.resident_file):
            if written is not None:
                written.unlink(missing_ok=True)
        self._stop.set()
        if self.cgroup is None:
            return
        for _ in range(100):
            with contextlib.suppress(OSError):
                for pid in (self.cgroup / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            try:
                self.cgroup.rmdir()
            except FileNotFoundError:
                break
            except OSError:  # the killed processes are still exiting
                time.sleep(0.02)
            else:
                break
        self.cgroup = None


def _counter(path: Path, name: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


class MemoryLimits:
    """How this machine caps a process tree's memory, found once per runner; a :class:`Cap` per
    invocation or attempt."""

    def __init__(self, on: bool = True) -> None:
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self.parent: Path | None = None
        self._peaks: Path | None = None
        self.mode: Mode = "off"
        if not on:
            return
        versions: tuple[Literal[2], Literal[1]] = (2, 1)
        for version in versions:
            self.parent = _writable_parent(version)
            if self.parent is not None:
                self.mode = "cgroup2" if version == 2 else "cgroup1"
                break
        else:
            self.mode = "rlimit"
        # what the processes write when they end: their peaks (rlimit), their cgroups' last samples (cgroups)
        self._peaks = Path(tempfile.mkdtemp(prefix="localcloud-memory-"))

    def cap(self, limit_mib: int | None) -> Cap:
        """A limit of ``limit_mib`` MiB (None, or limits off: a cap that limits nothing)."""
        if limit_mib is None or self.mode == "off":
            return Cap("off", limit_mib or 0)
        with self._lock:
            n = next(self._counter)
        if self.parent is None:
            assert self._peaks is not None
            return Cap(self.mode, limit_mib, peak_file=self._peaks / f"{n}.peak")
        cgroup = self.parent / f"run-{n}"
        cgroup.mkdir()
        limit = str(limit_mib * MIB)
        if self.mode == "cgroup2":
            (cgroup / "memory.max").write_text(limit)
            with contextlib.suppress(OSError):  # no swap, as on Lambda and in an ECS container by default
                (cgroup / "memory.swap.max").write_text("0")
        else:
            (cgroup / "memory.limit_in_bytes").write_text(limit)
            with contextlib.suppress(OSError):  # memory and swap together: no swap
                (cgroup / "memory.memsw.limit_in_bytes").write_text(limit)
        assert self._peaks is not None
        return Cap(self.mode, limit_mib, cgroup=cgroup, resident_file=self._peaks / f"{n}.resident")

    def close(self) -> None:
        """Remove this runner's cgroup (after its children's) or its folder of peaks."""
        if self.parent is not None:
            with contextlib.suppress(OSError):
                self.parent.rmdir()
            self.parent = None
        if self._peaks is not None:
            shutil.rmtree(self._peaks, ignore_errors=True)
            self._peaks = None


# ---------------------------------------------------------------- what Lambda reports
def lambda_outcome(cap: Cap, out: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The invocation's result or error, as Lambda reports it when the memory limit ended it."""
    if not cap.out_of_memory(out.get("errorType")):
        return out
    how = "signal: killed" if cap.killed() else f"MemoryError past {cap.limit_mib} MB"
    return {"errorType": LAMBDA_OUT_OF_MEMORY, "errorMessage": f"RequestId: {request_id} Error: Runtime exited "
                                                               f"with error: {how}"}


def report_line(request_id: str, seconds: float, memory_size: int, cap: Cap, out: dict[str, Any]) -> str:
    """Lambda's ``REPORT`` line (tab-separated, as Lambda writes it to the function's log stream) after
    the outcome ``out`` (:func:`lambda_outcome`): billed per millisecond, rounded up; an invocation its
    limit ended used all of it, as Lambda reports it; no ``Max Memory Used`` where nothing measured it."""
    millis = seconds * 1000
    fields = [f"REPORT RequestId: {request_id}", f"Duration: {millis:.2f} ms",
              f"Billed Duration: {max(1, math.ceil(millis))} ms", f"Memory Size: {memory_size} MB"]
    peak = cap.peak_mib()
    if out.get("errorType") == LAMBDA_OUT_OF_MEMORY:
        peak = max(peak or 0, memory_size)
    if peak is not None:
        fields.append(f"Max Memory Used: {peak} MB")
    return "\t".join(fields)
