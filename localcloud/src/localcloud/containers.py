"""Batch attempts as containers: ``podman run`` of the app's worker image (``--containers``).

With the app's containers setting (:attr:`.contract.Settings.containers`) at ``1`` in its environment (what
``--containers`` sets) the local Batch runs each attempt as the worker image that ECS runs on AWS, built from the
app's checkout by the app's build (:class:`.contract.WorkerImage`): the job definition's command (the image's
entry point in front, as ECS keeps an image's ``ENTRYPOINT``), the environment Batch gives the container (the job
definition's, the submit-time overrides, ``AWS_BATCH_*``) and the job role's credentials, which are the local
cloud's fake ones with ``AWS_ENDPOINT_URL`` (the container shares the host's network, so the local endpoint on
the loopback interface is reachable); the job's vCPU and memory requirements as cgroup limits where the
kernel has the controllers; the job definition's host volumes mounted; its output, as the awslogs driver
sends it, into the attempt's log (and from there to CloudWatch Logs, as for a process).

A lost Spot instance is a container stopped the way ECS stops it: SIGTERM to its PID 1, SIGKILL after
:data:`STOP_TIMEOUT_SECONDS` (:meth:`PodmanRun.reclaim`). The attempt then reports the signal, as a
killed process does, which the local Batch reports as a Spot reclaim. The fault tests trigger it
through the worker's ``kill`` fault: PID 1 of a container cannot SIGKILL itself, so there the worker
prints the app's reclaim marker (:attr:`.contract.App.reclaim_marker`) and waits, and the runner reclaims its instance.

The image is tagged with a digest of the files it is built from (:func:`image_ref`): the runner finds the
image of the app's checkout, or says that it has to be built. This module imports nothing but the standard
library, :mod:`.contract` and :mod:`.errors`, so that the app's build can name the image before anything is
installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud import contract
from localcloud.errors import LocalCloudError

#: between SIGTERM and SIGKILL when a container is stopped (the ECS agent's ECS_CONTAINER_STOP_TIMEOUT default)
STOP_TIMEOUT_SECONDS = 30
#: what ``podman run`` exits with when the container's process was killed by SIGKILL
_SIGKILL_STATUS = 128 + signal.SIGKILL
#: what ``podman run`` exits with when the container did not start (podman-run(1), EXIT STATUS): 125, podman
#: itself failed (no such image, a bad option); 126, the command cannot be invoked; 127, it cannot be found
START_FAILURES = (125, 126, 127)
#: the status reason ECS gives a task whose container did not start (with the runtime's message after it)
CANNOT_START = "CannotStartContainerError"


def var() -> str:
    """The setting's name (the app's): ``1`` runs Batch attempts as containers (``--containers`` sets it)."""
    return contract.app().settings.containers


def enabled(env: Mapping[str, str]) -> bool:
    return env.get(var(), "").strip().lower() in ("1", "true", "yes")


def worker_image() -> contract.WorkerImage:
    """The app's worker image (an app without one runs Batch attempts as processes only)."""
    image = contract.app().worker_image
    if image is None:
        raise LocalCloudError("containers: the app has no worker image")
    return image


def _image_files(image: contract.WorkerImage, root: Path) -> Iterator[Path]:
    for name in image.files:
        yield root / name
    for path in sorted((root / image.tree).rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not set(parts) & set(image.excluded_parts) and not any(
            p.endswith(image.excluded_suffixes) for p in parts
        ):
            yield path


def image_digest(image: contract.WorkerImage, root: Path | None = None) -> str:
    """A digest of the image's inputs: their paths and contents (``root``: another copy of the image's root)."""
    root = image.root if root is None else root
    h = hashlib.sha256()
    for path in _image_files(image, root):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def image_ref(image: contract.WorkerImage | None = None) -> str:
    """The worker image built from the app's checkout (default: the app's image)."""
    image = worker_image() if image is None else image
    return f"{image.name}:{image_digest(image)}"


#: variables podman itself reads (containers.conf(5), podman(1) ENVIRONMENT): a job's values of these (the
#: job definition's TMPDIR=/scratch, a container path) must reach the container only, never podman's own
#: environment, where podman would put its temporary files in a folder the host does not have
PODMAN_READS = ("TMPDIR", "HOME", "PATH", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "STORAGE_DRIVER",
                "STORAGE_OPTS", "REGISTRY_AUTH_FILE")
_PODMAN_READS_PREFIX = "CONTAINERS_"


def read_by_podman(name: str) -> bool:
    return name in PODMAN_READS or name.startswith(_PODMAN_READS_PREFIX)


def podman_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """podman's environment: with the app's settings for podman (:attr:`.contract.WorkerImage.podman_conf`),
    unless ``CONTAINERS_CONF`` names others."""
    env = dict(os.environ if base is None else base)
    image = contract.app().worker_image
    if image is not None and image.podman_conf:
        env.setdefault("CONTAINERS_CONF", str(image.root / image.podman_conf))
    return env


def _podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, env=podman_env(), timeout=timeout,
                          check=False)


def unavailable_reason(image: str) -> str | None:
    """Why attempts cannot run as ``image`` (the app's, tagged) on this machine (None: they can)."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman runc; see docs/LOCAL_CLOUD.md)"
    info = _podman("info", "--format", "{{.Host.OCIRuntime.Name}}")
    if info.returncode != 0:
        return f"podman does not work here: {(info.stderr.strip().splitlines() or ['?'])[-1]}"
    if _podman("image", "exists", image).returncode != 0:
        build = worker_image().build_command
        return f"the worker image of this checkout, {image}, is not built" + (f": run `{build}`" if build else "")
    return None


def require(flag: bool) -> None:
    """``--containers``: set the setting for this process (and its children); when it is set, by the flag or
    by the app's containers setting in the environment, fail now, with the reason, if containers cannot run."""
    if flag:
        os.environ[var()] = "1"
    if enabled(os.environ):
        reason = unavailable_reason(image_ref())
        if reason is not None:
            raise LocalCloudError(f"containers: {reason}")


@dataclass(frozen=True)
class Resources:
    vcpus: float | None = None
    memory_mib: int | None = None


def resources(container_properties: dict[str, Any], overrides: dict[str, Any]) -> Resources:
    """The attempt's VCPU and MEMORY requirements (the submit-time overrides win), and the legacy fields."""
    found = {"VCPU": container_properties.get("vcpus"), "MEMORY": container_properties.get("memory")}
    for source in (container_properties, overrides):
        for req in source.get("resourceRequirements") or []:
            found[str(req.get("type"))] = req.get("value")
    vcpus, memory = found.get("VCPU"), found.get("MEMORY")
    return Resources(float(vcpus) if vcpus else None, int(memory) if memory else None)


def forwarded(base_env: Mapping[str, str]) -> dict[str, str]:
    """What a container gets from the local cloud besides Batch's own variables: the job role's
    credentials, region and endpoint (the ``AWS_*`` the local cloud sets), and the test-only fault hook."""
    fault_var = contract.app().fault_var
    return {k: v for k, v in base_env.items() if k.startswith("AWS_") or (fault_var and k == fault_var)}


def _cgroup_controllers() -> set[str]:
    """The controllers a container can be limited with (cgroup v2's list, or v1's mounted hierarchies)."""
    unified = Path("/sys/fs/cgroup/cgroup.controllers")
    if unified.is_file():
        return set(unified.read_text().split()) | {"memsw"}  # v2: swap is limited with memory
    v1 = {p.name for p in Path("/sys/fs/cgroup").iterdir()} if Path("/sys/fs/cgroup").is_dir() else set()
    if Path("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists():
        v1.add("memsw")
    return v1


def limit_options(wanted: Resources, controllers: set[str], cpus: int) -> list[str]:
    """``podman run`` options for the job's vCPUs and memory, as far as this kernel can enforce them; no
    more CPUs than the machine has (podman refuses more), no swap (ECS gives a container none by default)."""
    out = []
    if wanted.vcpus and "cpu" in controllers:
        out += ["--cpus", f"{min(wanted.vcpus, float(cpus)):g}"]
    if wanted.memory_mib and "memory" in controllers:
        out += ["--memory", f"{wanted.memory_mib}m"]
        if "memsw" in controllers:
            out += ["--memory-swap", f"{wanted.memory_mib}m"]
    return out


@dataclass(frozen=True)
class Attempt:
    """One attempt, in the terms of ``podman run``."""

    name: str
    command: list[str]
    env: dict[str, str]
    resources: Resources
    #: container path -> host folder
    volumes: dict[str, str]
    log_path: Path


def container_name(job_id: str, attempt: int) -> str:
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in job_id)
    return f"{worker_image().container_prefix}{safe}-{attempt}"


class PodmanRun(subprocess.Popen[bytes]):
    """``podman run`` of one attempt; its output copied line by line into the attempt's log."""

    def __init__(self, argv: list[str], *, name: str, env: dict[str, str], log_path: Path) -> None:
        super().__init__(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        self.name = name
        #: the attempt's instance was reclaimed: the container was stopped as ECS stops it
        self.reclaimed = False
        #: why the container did not start (ECS's ``CannotStartContainerError: ...``), once :meth:`wait` knows
        self.start_error: str | None = None
        self._log_path = log_path
        self._copier = threading.Thread(target=self._copy, args=(log_path,), daemon=True, name=f"log-{name}")
        self._copier.start()

    def _copy(self, log_path: Path) -> None:
        assert self.stdout is not None
        marker = contract.app().reclaim_marker.encode()
        with log_path.open("wb") as log:
            for line in self.stdout:
                log.write(line)
                log.flush()
                if marker and marker in line and not self.reclaimed:
                    threading.Thread(target=self.reclaim, daemon=True, name=f"reclaim-{self.name}").start()

    def reclaim(self) -> None:
        """The Spot instance is reclaimed: SIGTERM to the container's PID 1, SIGKILL after the stop timeout."""
        self.reclaimed = True
        subprocess.run(["podman", "stop", "--time", str(STOP_TIMEOUT_SECONDS), self.name],
                       capture_output=True, env=podman_env(), check=False)

    def wait(self, timeout: float | None = None) -> int:
        """The container's exit code; after a reclaim, the signal that ended it, negative (as a process
        killed by a signal reports it), which the local Batch reports as a reclaimed Spot instance."""
        code = super().wait(timeout)
        self._copier.join()
        if self.reclaimed:
            return -signal.SIGKILL if code == _SIGKILL_STATUS else -signal.SIGTERM
        if code in START_FAILURES:
            self.start_error = start_error(code, self._log_path)
        return code

    def kill(self) -> None:
        """Remove the container (killing ``podman run`` alone would leave it running)."""
        subprocess.run(["podman", "rm", "--force", "--time", "0", self.name], capture_output=True,
                       env=podman_env(), check=False)
        super().kill()


def start_error(code: int, log_path: Path) -> str:
    """The status reason of a container that did not start: ECS's ``CannotStartContainerError:`` with
    podman's own message (its last ``Error:`` line; the container's output shares the log but has none
    of podman's lines, as the container never ran)."""
    lines = log_path.read_text(errors="replace").splitlines() if log_path.is_file() else []
    errors = [line.removeprefix("Error: ").strip() for line in lines if line.startswith("Error: ")]
    return f"{CANNOT_START}: {errors[-1] if errors else f'podman run exited with {code}'}"


class ContainerRunner:
    """Starts attempts as containers of one image."""

    def __init__(self, image: str) -> None:
        self.image = image
        self._controllers = _cgroup_controllers()

    def argv(self, attempt: Attempt) -> list[str]:
        """The ``podman run`` command line (the environment's values are passed through podman's own
        environment, by name, so that no credential is on a command line; but those podman itself reads go
        by value: none of them is a secret)."""
        out = ["podman", "run", "--rm", "--name", attempt.name, "--network", "host",
               "--stop-timeout", str(STOP_TIMEOUT_SECONDS)]
        out += limit_options(attempt.resources, self._controllers, os.cpu_count() or 1)
        for container_path, host in attempt.volumes.items():
            out += ["--volume", f"{host}:{container_path}"]
        for name in sorted(attempt.env):
            out += ["--env", f"{name}={attempt.env[name]}" if read_by_podman(name) else name]
        return [*out, self.image, *attempt.command]

    def start(self, attempt: Attempt) -> PodmanRun:
        for host in attempt.volumes.values():
            # the image runs as a user of its own: a host volume is world-writable and sticky, as an instance's
            # launch template makes its host folders for a worker that is not root
            Path(host).chmod(0o1777)
        env = {**podman_env(), **{k: v for k, v in attempt.env.items() if not read_by_podman(k)}}
        return PodmanRun(self.argv(attempt), name=attempt.name, env=env, log_path=attempt.log_path)

