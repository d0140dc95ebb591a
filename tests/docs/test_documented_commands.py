"""Every shell command in README.md and docs/*.md works as documented.

Each command of a shell block is one test case. ``seqlake`` commands run for real, from one working folder
(so the local cloud's home is the default relative ``./.seqlake``, as a new user's is), on the bundled demo
reads and reference under the names the docs use (``sample_R1.fastq.gz``, ``ref.fasta``, ...); ``RUN_ID``
is the run the first of them made. A command is not run only where that is impossible here, and its case
says why (after checking its arguments parse). The AWS-only commands cannot run here: ``aws`` commands are
checked against botocore's service models (the operation exists, every option is one of its parameters or
a global option: what the AWS CLI builds its options from), ``aws s3`` and ``sam`` commands against their
``--help`` (recorded in ``aws_cli_options.json``; the SAM record is compared with the installed SAM CLI's
own ``--help`` where ``make lint`` has installed it). ``make`` targets must exist; scripts must exist and
take the arguments shown. Inline commands in the prose (`` `seqlake local runs` ``) are checked for their
options. The SQL blocks run through ``seqlake local query``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from doc_commands import DOCS, REPO, Block, Command, blocks, commands, options_in_help, untagged_command_blocks

import seqlake
from seqlake.cli import build_parser
from seqlake.demo_data import paths

pytestmark = pytest.mark.e2e

ALL: list[Command] = [c for doc in DOCS for c in commands(doc)]
RECORDED = json.loads((Path(__file__).with_name("aws_cli_options.json")).read_text())
SAM = Path(os.environ.get("SEQLAKE_TOOLS_DIR") or REPO / ".tools") / "sam" / "bin" / "sam"
SEQLAKE_PROGRAMS = ("seqlake", ".venv/bin/seqlake", "~/seqlake/bin/seqlake")
#: the user's machine and the shell's plumbing (pyenv, PATH, a loop): nothing of this app's to check
NOT_OURS = ("pyenv", "export", "date", "read", "cd", "mkdir", "docker", "while", "done", "break", "grep")
#: the one documented command the shared working folder is made with (the README's first own-data run)
FIRST_RUN = ("local", "run", "sample_R1.fastq.gz", "sample_R2.fastq.gz", "--reference", "ref.fasta")
#: documented seqlake commands not run here, and why (their arguments are parsed all the same)
NOT_RUN: dict[str, str] = {
    "--containers": "needs podman and the worker image (`make image`); tests/local/test_containers.py runs "
                    "the local cloud with --containers",
    "demo": "`seqlake demo` is run by tests/local/test_demo.py from a fresh state folder",
}


@dataclass
class Workdir:
    """The folder the documented commands run in, and the run the first of them made."""

    root: Path
    run_id: str
    env: dict[str, str]
    #: the documented command lines run here so far, and how each ended. The docs repeat some word for word
    #: (the first run: this folder's own, then README.md's and LOCAL_CLOUD.md's; `local rerun RUN_ID` twice):
    #: the same words in the same folder are one check, made once (each `local run` or `rerun` starts a local
    #: cloud: ~10-30 CPU-s), and each case asserts on how that run ended
    ran: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def words(self, argv: tuple[str, ...]) -> list[str]:
        return [self.run_id if w == "RUN_ID" else w for w in argv]

    def seqlake(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "seqlake", *args], cwd=self.root, env=self.env, text=True,
                              capture_output=True, timeout=600, check=False)

    def seqlake_once(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``seqlake ARGS``, unless these very words ran here already: then how they ended."""
        if args not in self.ran:
            self.ran[args] = self.seqlake(*args)
        return self.ran[args]


def _samplesheet(root: Path) -> None:
    """``samplesheet.csv``: two samples of real reads (a pair, and a single-end file) beside it."""
    edge = REPO / "tests" / "data" / "edge"
    for name in ("cutadapt/paired.1.fastq", "cutadapt/paired.2.fastq", "biopython/example.fastq"):
        shutil.copyfile(edge / name, root / Path(name).name)
    (root / "samplesheet.csv").write_text("sample,fastq_1,fastq_2\npaired,paired.1.fastq,paired.2.fastq\n"
                                          "single,example.fastq,\n")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Workdir:
    root = tmp_path_factory.mktemp("first-hour")
    r1, r2, reference = paths()
    shutil.copyfile(r1, root / "sample_R1.fastq.gz")
    shutil.copyfile(r2, root / "sample_R2.fastq.gz")
    shutil.copyfile(reference, root / "ref.fasta")
    _samplesheet(root)
    env = {k: v for k, v in os.environ.items() if k != "SEQLAKE_HOME"}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
               BROWSER="true", COLUMNS="200")  # `--open` opens the page with `true`: no browser here
    work = Workdir(root, "", env)
    proc = work.seqlake_once(*FIRST_RUN)
    assert proc.returncode == 0, proc.stderr[-3000:]
    work.run_id = json.loads((root / ".seqlake" / "runs.json").read_text())[0]["run_id"]
    return work


def test_the_first_run_is_a_documented_command() -> None:
    assert FIRST_RUN in {tuple(c.argv[1:]) for c in ALL if c.fenced and c.program in SEQLAKE_PROGRAMS}


def test_every_command_block_is_tagged_as_shell() -> None:
    untagged = [f"{b.doc}:{b.line}" for doc in DOCS for b in untagged_command_blocks(doc)]
    assert untagged == [], "tag these blocks ```bash so that their commands are checked"


def test_no_placeholder_is_a_shell_redirection() -> None:
    """``<run_id>`` pasted into a shell reads a file named run_id: placeholders are words (RUN_ID, $BUCKET)."""
    assert [str(c) for c in ALL if c.fenced and "<" in c.argv] == []


def test_every_variable_is_defined_before_it_is_used() -> None:
    problems = []
    for doc in DOCS:
        defined = set(ENVIRONMENT_VARIABLES)
        for c in commands(doc):
            if c.fenced:
                problems += [f"{c.where}: ${v} is used before the page defines it" for v in c.uses if v not in defined]
                defined.update(c.assigns)
    assert problems == []


ENVIRONMENT_VARIABLES = ("PATH", "HOME", "PWD")


# -- the checks, by program ------------------------------------------------------------------------------

def _parser_for(words: list[str]) -> tuple[object, list[str]]:
    """The argparse parser of the (sub)command ``words`` name, and the words after its name."""
    import argparse

    parser = build_parser()
    rest = list(words)
    while rest:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or rest[0] not in subs[0].choices:
            break
        parser = subs[0].choices[rest.pop(0)]
    return parser, rest


def _check_seqlake_options(command: Command) -> None:
    parser, rest = _parser_for(list(command.argv[1:]))
    known = {s for a in parser._actions for s in a.option_strings}  # type: ignore[attr-defined]
    unknown = [w.split("=", 1)[0] for w in rest if w.startswith("--") and w.split("=", 1)[0] not in known]
    assert unknown == [], f"{command}: no such option of `{parser.prog}`"  # type: ignore[attr-defined]


def _parse(command: Command) -> None:
    try:
        build_parser().parse_args(list(command.argv[1:]))
    except SystemExit as err:
        pytest.fail(f"{command}: does not parse (exit {err.code})")


def check_seqlake(command: Command, workdir: Workdir) -> None:
    _check_seqlake_options(command)
    if not command.fenced:
        return
    _parse(command)
    why = next((why for word, why in NOT_RUN.items() if word in command.argv), None)
    if command.program.startswith("~"):
        why = "runs the seqlake installed from the wheel (the wheel's contents: tests/local/test_packaged_app.py)"
    if why:
        pytest.skip(f"options checked, not run: {why}")
    proc = workdir.seqlake_once(*workdir.words(command.argv[1:]))
    assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.MULTILINE))


def check_make(command: Command, workdir: Workdir) -> None:
    targets = [w for w in command.argv[1:] if not w.startswith("-") and "=" not in w]
    assert targets and set(targets) <= _make_targets(), f"{command}: no such make target"


def _sam_options(sub: str) -> list[str]:
    return list(RECORDED["sam"].get(sub, []))


def check_sam(command: Command, workdir: Workdir) -> None:
    sub = command.argv[1] if len(command.argv) > 1 else ""
    known = _sam_options(sub)
    assert known, f"{command}: `sam {sub}` is not a command this app's docs know (add it to aws_cli_options.json)"
    flags = [w.split("=", 1)[0] for w in command.argv[2:] if w.startswith("-")]
    assert [f for f in flags if f not in known] == [], f"{command}: not an option of `sam {sub}`"


def _aws_api_options(service: str, operation: str) -> set[str] | None:
    """The options the AWS CLI gives ``aws SERVICE OPERATION``, from botocore's model (None: no such operation)."""
    import botocore.session
    from botocore import xform_name

    session = botocore.session.get_session()
    model = session.get_service_model({"s3api": "s3"}.get(service, service))
    names = {xform_name(op, "-"): op for op in model.operation_names}
    if operation not in names:
        return None
    shape = model.operation_model(names[operation]).input_shape
    members = shape.members if shape is not None else {}
    options = {"--" + xform_name(m, "-") for m in members}
    options |= {"--no-" + xform_name(m, "-") for m, s in members.items() if s.type_name == "boolean"}
    options |= {"--cli-input-json", "--cli-input-yaml", "--generate-cli-skeleton"}
    try:
        session.get_paginator_model(model.service_name).get_paginator(names[operation])
        options |= {"--max-items", "--starting-token", "--page-size"}
    except ValueError:
        pass
    return options


def check_aws(command: Command, workdir: Workdir) -> None:
    assert len(command.argv) >= 3, f"{command}: an aws command names a service and an operation"
    service, operation = command.argv[1], command.argv[2]
    flags = {w.split("=", 1)[0] for w in command.argv[3:] if w.startswith("--")}
    if service == "s3":
        known = set(RECORDED["aws s3"].get(operation, []))
        assert known, f"{command}: `aws s3 {operation}` is not an aws s3 command"
    else:
        options = _aws_api_options(service, operation)
        assert options is not None, f"{command}: `aws {service}` has no operation {operation}"
        known = options | set(RECORDED["aws"])
    assert sorted(flags - known) == [], f"{command}: not an option of `aws {service} {operation}`"


def check_xargs(command: Command, workdir: Workdir) -> None:
    """``... | xargs -n1 aws ...``: the command xargs runs (its last argument comes from the pipe)."""
    rest = command.argv[command.argv.index("aws"):]
    check_aws(Command(command.doc, command.line, rest, command.fenced), workdir)


def check_script(command: Command, workdir: Workdir) -> None:
    script = REPO / command.program
    assert script.is_file() and os.access(script, os.X_OK), f"{command}: no such executable script"
    if script.name == "push-worker-image.sh":
        environments = tomllib.loads((REPO / "samconfig.toml").read_text())
        env = command.argv[1]
        assert "deploy" in environments.get(env, {}), f"{command}: samconfig.toml has no [{env}.deploy.parameters]"


def check_python(command: Command, workdir: Workdir) -> None:
    args = list(command.argv[1:])
    assert args[:1] == ["-m"], f"{command}: the docs run Python modules with -m"
    module, rest = args[1], args[2:]
    if module == "venv":
        return
    assert module.split(".")[0] in ("seqlake", "localcloud"), f"{command}: not a module of seqlake or its local cloud"
    proc = subprocess.run([sys.executable, "-m", module, "--help"], env=workdir.env, text=True,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    flags = [w.split("=", 1)[0] for w in rest if w.startswith("--")]
    assert [f for f in flags if f not in proc.stdout] == [], f"{command}: not an option of {module}"


def check_pip(command: Command, workdir: Workdir) -> None:
    wheels = [w for w in command.argv if ".whl" in w]
    component = tomllib.loads((REPO / "localcloud" / "pyproject.toml").read_text())["project"]["version"]
    ours = {f"seqlake-{seqlake.__version__}-py3-none-any.whl", f"localcloud-{component}-py3-none-any.whl"}
    for wheel in wheels:  # the wheels `pip wheel` makes of this version, with an extra the package has
        name = Path(wheel.split("[", 1)[0]).name
        assert name in ours, f"{command}: not this version's wheel"
        extras = re.findall(r"\[(\w+)\]", wheel)
        optional = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        assert set(extras) <= set(optional), f"{command}: no such extra"
    pytest.skip("not run: installs the wheel's dependencies from PyPI and compiles mappy (minutes); the wheel's "
                "contents are tested by tests/local/test_packaged_app.py")


def check_multiqc(command: Command, workdir: Workdir) -> None:
    pytest.skip("not run: tests/report/test_multiqc.py runs the real multiqc on a run's report folder")


def check_not_ours(command: Command, workdir: Workdir) -> None:
    """The user's machine (pyenv, PATH) or the shell (a loop, grep): nothing of this app's to check."""


Check = Callable[[Command, Workdir], None]
CHECKS: dict[str, Check] = {
    **dict.fromkeys(SEQLAKE_PROGRAMS, check_seqlake),
    "make": check_make, "sam": check_sam, "aws": check_aws, "xargs": check_xargs,
    "python": check_python, "python3": check_python, ".venv/bin/python": check_python,
    "pip": check_pip, "~/seqlake/bin/pip": check_pip, "multiqc": check_multiqc,
    **dict.fromkeys(NOT_OURS, check_not_ours),
}


def check_of(command: Command) -> Check | None:
    if command.program.startswith("scripts/"):
        return check_script
    return CHECKS.get(command.program)


def test_every_documented_command_has_a_check() -> None:
    assert [str(c) for c in ALL if c.argv and check_of(c) is None] == []


@pytest.mark.parametrize("command", [c for c in ALL if c.argv and check_of(c) is not None], ids=str)
def test_documented_command(command: Command, workdir: Workdir) -> None:
    check = check_of(command)
    assert check is not None
    check(command, workdir)


SQL_BLOCKS = [b for doc in DOCS for b in blocks(doc) if b.tag == "sql"]


#: the placeholders a documented query may hold, each a value the reader takes from an earlier step: RUN_ID a
#: run's id (this folder's run), SNAPSHOT_ID the ``snapshot_id`` an earlier query of the same page returned
#: (Athena's ``FOR VERSION AS OF`` takes a literal only, so time travel to a run is two queries)
_SQL_PLACEHOLDER = re.compile(r"\b(RUN_ID|SNAPSHOT_ID)\b")


def documented_sql(block: Block, workdir: Workdir) -> str:
    """The block's query with its placeholders filled in as a reader of the page fills them."""
    def value(m: re.Match[str]) -> str:
        if m.group(1) == "RUN_ID":
            return workdir.run_id
        earlier = [b for b in SQL_BLOCKS if b.doc == block.doc and b.line < block.line]
        for b in reversed(earlier):
            proc = workdir.seqlake_once("local", "query", "--format", "json", documented_sql(b, workdir))
            rows = json.loads(proc.stdout) if proc.returncode == 0 else []
            if rows and "snapshot_id" in rows[0]:
                return str(rows[0]["snapshot_id"])
        raise AssertionError(f"{block.doc}:{block.line}: SNAPSHOT_ID, but no earlier query of the page returns one")

    return _SQL_PLACEHOLDER.sub(value, block.text)


@pytest.mark.parametrize("block", SQL_BLOCKS, ids=lambda b: f"{b.doc}:{b.line}")
def test_documented_sql_runs(block: Block, workdir: Workdir) -> None:
    proc = workdir.seqlake_once("local", "query", "--format", "json", documented_sql(block, workdir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SNAPSHOT_ID" not in block.text or json.loads(proc.stdout), "the run's snapshot reads no row"


def test_the_recorded_sam_options_are_the_installed_sam_clis() -> None:
    if not SAM.is_file():
        pytest.skip(f"no SAM CLI at {SAM} (`make lint` installs it): the recorded options stand")
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "COLUMNS": "80"}  # the width the options were recorded at
    for sub, recorded in RECORDED["sam"].items():
        out = subprocess.run([str(SAM), sub, "--help"], env=env, text=True, capture_output=True, timeout=120,
                             check=True).stdout
        assert options_in_help(out) == recorded, sub
