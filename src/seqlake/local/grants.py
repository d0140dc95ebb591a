"""Each grant needed: every statement of every role of the deployed template taken away in turn, and the
smallest runs that need it run until one fails with an AccessDenied naming one of its actions.

``python -m seqlake.local.grants [--role ROLE]... [--report FILE]`` (``make grants``). One local cloud
(IAM enforced) serves the whole sweep: a statement is removed from its role's policy as deployed (the
inline policy put again without it; the lab member's managed policy replaced by an inline copy without
it), the scenarios run in order, cheapest first, each with inputs of its own, and the statement is put
back. The statements are read from the deployed roles, so a statement or role added to the template is
swept without a change here.

Per statement the outcome is one of:

- **needed**: a scenario's request was refused, naming one of the statement's actions (the run's
  ``reason`` recorded where the failing step can record one: a Batch child's last line, a failed step's
  cause; not where the step that fails is the start or the recorder itself);
- **not exercised locally**: nothing failed, and :data:`NOT_EXERCISED` says why no local run can need it
  (a statement there that a run does need is reported as stale);
- **unexplained**: nothing failed and no reason is written: the sweep fails.

AWS's managed policies that SAM or the template attach (``AWSLambdaBasicExecutionRole`` ...) are AWS's to
change: they are listed, not swept.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcloud import iam
from localcloud.cloud import LocalCloud
from localcloud.policy import wildcard_match
from localcloud.state import StateDir
from seqlake.base.layout import RunLayout
from seqlake.local.adapter import local_cloud, worker_fault

#: (role logical id, Sid or policy name) -> why no local run needs the statement
NOT_EXERCISED: dict[tuple[str, str], str] = {
    ("PipelineStateMachineRole", "SyncIntegrationRule"):
        "Step Functions' own managed rule for .sync Batch tasks; the local interpreter polls DescribeJobs",
    ("PipelineStateMachineRole", "DeliverExecutionLogs"):
        "CloudWatch Logs delivery of execution logs; the local interpreter writes none",
    ("PipelineStateMachineRole", "XRayTraces"): "X-Ray tracing is off locally",
    ("PipelineStateMachineRole", "StopShardJobsWhenTheExecutionStops"):
        "TerminateJob is called by Step Functions when an execution is stopped; no local run stops one",
    ("RecordFailureFunctionRole", "StopTheJobsOfATimedOutStep"):
        "a Batch step times out after BatchStepTimeoutSeconds (600 s at least, queueing included); no local "
        "scenario waits that long (tests/aws/test_jobsize.py checks the calls against Batch's API model)",
    ("RecordRunEndFunctionRole", "ListRunsSoAMissingStatusIs404"):
        "a run whose execution ended before its plan step wrote status.json (stopped at once, or its first task's "
        "input refused); no scenario ends one that early",
    ("LabMemberPolicy", "ReadTheCatalog"):
        "Athena reads the catalog with the caller's permissions; the local Athena reads moto's catalog itself",
    ("LabMemberPolicy", "WriteAndReadQueryResults"):
        "Athena writes a query's result under athena-results/ as the caller; the local Athena answers from memory",
    ("LabMemberPolicy", "ListResultsForQueries"):
        "Athena lists the tables' files as the caller; the local Athena reads the state folder's mirror",
    ("LabMemberPolicy", "FindTheBucketsRegion"):
        "Athena and the AWS CLI ask the bucket's region as the caller; the local cloud has one region",
}
#: scenario name -> what it runs
SCENARIOS: dict[str, str] = {
    "good": "a paired run with a reference, end to end (start, settle, plan, 2 shards, commit)",
    "rejected": "a samplesheet without fastq_1: the start function rejects it and records it",
    "bad": "R1/R2 whose read names differ: a child exits 65, the failure step records it",
    "crash": "every child exits 1: the failure step reads the child's last log line",
    "half-commit": "the commit dies after registering one table: the failure step undoes it",
    "user": "the lab member queries the tables and reads the run's status and report",
    "dead-letter": "the start function fails every attempt (its settle queue gone): the event to its dead-letter queue",
    "unrecorded": "R1/R2 whose read names differ while the failure step fails (GLUE_DATABASE unset): the backstop "
                  "records the run from its execution's FAILED event",
    "backstop-dead-letter": "the same with the backstop failing too (GLUE_DATABASE unset): its event to its "
                            "dead-letter queue",
    "delete-sample": "a paired run, then its sample deleted by DeleteSampleFunction (invoked as the lab does)",
    "compact": "a paired run of two children, then CompactFunction with SNAPSHOT_RETENTION_DAYS 0 (its files "
               "rewritten into one, the replaced ones removed)",
}
#: the scenarios of the maintenance functions -> the role they are for. No run invokes those functions, so a
#: statement of that role is tried with its scenario alone; a statement of another role with the others only
MAINTENANCE: dict[str, str] = {"delete-sample": "DeleteSampleFunctionRole", "compact": "CompactFunctionRole"}


def scenarios_for(role: str) -> list[str]:
    """The scenarios a statement of ``role`` is tried with, in order."""
    if role in MAINTENANCE.values():
        return [s for s, r in MAINTENANCE.items() if r == role]
    return [s for s in SCENARIOS if s not in MAINTENANCE]


@dataclass(frozen=True)
class Grant:
    """One statement of one role's policy, as deployed."""

    role: str
    role_name: str
    policy: str
    index: int
    statement: dict[str, Any]
    managed: bool = False

    @property
    def label(self) -> str:
        return str(self.statement.get("Sid") or f"{self.policy}[{self.index}]")

    @property
    def actions(self) -> list[str]:
        found = self.statement.get("Action", [])
        return [found] if isinstance(found, str) else list(found)


@dataclass
class Finding:
    grant: Grant
    outcome: str
    scenario: str = ""
    denied: list[tuple[str, str]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    note: str = ""


def _role_ids(cloud: LocalCloud) -> dict[str, str]:
    """Role name -> its logical id, for the template's roles and the lab member's."""
    d = cloud.deployment
    out = {str(d.physical[lid]): lid for lid, r in d.cfn["Resources"].items()
           if r["Type"] == "AWS::IAM::Role" and lid in d.physical}
    out[iam.user_role()] = iam.USER_POLICY
    return out


def grants(cloud: LocalCloud) -> tuple[list[Grant], list[str]]:
    """The statements of the deployed roles' inline policies and of the lab member's policy, and the AWS
    managed policies attached (not swept)."""
    client = cloud.client("iam")
    found: list[Grant] = []
    aws_managed: list[str] = []
    for name, lid in _role_ids(cloud).items():
        for policy in client.list_role_policies(RoleName=name)["PolicyNames"]:
            doc = client.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"]
            for i, st in enumerate(_statements(doc)):
                found.append(Grant(lid, name, policy, i, st))
        for attached in client.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
            arn = attached["PolicyArn"]
            if ":iam::aws:policy/" in arn:
                aws_managed.append(f"{lid}: {arn}")
                continue
            version = client.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
            doc = client.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"]["Document"]
            for i, st in enumerate(_statements(doc)):
                found.append(Grant(lid, name, arn, i, st, managed=True))
    return found, aws_managed


def _statements(doc: Any) -> list[dict[str, Any]]:
    doc = json.loads(doc) if isinstance(doc, str) else doc
    st = doc.get("Statement", [])
    return [st] if isinstance(st, dict) else list(st)


@contextlib.contextmanager
def without(cloud: LocalCloud, grant: Grant) -> Iterator[None]:
    """The role as deployed but for ``grant``'s statement, until the block ends."""
    client = cloud.client("iam")
    if grant.managed:
        doc = client.get_policy_version(
            PolicyArn=grant.policy, VersionId=client.get_policy(PolicyArn=grant.policy)["Policy"]["DefaultVersionId"]
        )["PolicyVersion"]["Document"]
    else:
        doc = client.get_role_policy(RoleName=grant.role_name, PolicyName=grant.policy)["PolicyDocument"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    rest = [s for i, s in enumerate(_statements(doc)) if i != grant.index]
    reduced = json.dumps({**doc, "Statement": rest})
    name = "sweep" if grant.managed else grant.policy
    if grant.managed:
        client.detach_role_policy(RoleName=grant.role_name, PolicyArn=grant.policy)
    if rest:  # a policy of one statement goes as a whole (IAM refuses an empty one)
        client.put_role_policy(RoleName=grant.role_name, PolicyName=name, PolicyDocument=reduced)
    elif not grant.managed:
        client.delete_role_policy(RoleName=grant.role_name, PolicyName=name)
    try:
        yield
    finally:
        if grant.managed:
            if rest:
                client.delete_role_policy(RoleName=grant.role_name, PolicyName=name)
            client.attach_role_policy(RoleName=grant.role_name, PolicyArn=grant.policy)
        else:
            client.put_role_policy(RoleName=grant.role_name, PolicyName=name, PolicyDocument=json.dumps(doc))


# ---------------------------------------------------------------- the runs
def _fastq(names: list[str], seqs: list[str]) -> bytes:
    return gzip.compress("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in zip(names, seqs, strict=True)).encode())


class Runs:
    """The scenarios, each with inputs of its own (a run id is a digest of its inputs)."""

    def __init__(self, cloud: LocalCloud, work: Path) -> None:
        from seqlake import demo_data

        self.cloud, self.work, self.n = cloud, work, 0
        reference = demo_data.reference_path()
        self.genome = "".join(reference.read_text().splitlines()[1:])
        cloud.override_parameter("ReferenceUri", cloud.upload(reference, f"references/{reference.name}", as_admin=True))
        cloud.override_parameter("ReadsPerShard", "1000")

    def _pair(self, folder: str, mismatch: bool = False) -> None:
        self.n += 1
        names = [f"r{self.n}_{i}" for i in range(1500 + self.n)]
        g = self.genome
        r1 = [g[(i * 7) % 20000:(i * 7) % 20000 + 100] for i in range(len(names))]
        r2 = [g[(i * 7) % 20000 + 200:(i * 7) % 20000 + 300] for i in range(len(names))]
        mates = [n + ("x" if mismatch else "") for n in names]
        for mate, (ids, seqs) in ((1, (names, r1)), (2, (mates, r2))):
            path = self.work / f"{folder}-{self.n}_R{mate}.fastq.gz"
            path.write_bytes(_fastq(ids, seqs))
            self.cloud.upload(path, f"incoming/{folder}-{self.n}/s{self.n}_R{mate}.fastq.gz")

    def run(self, scenario: str) -> list[str]:
        """Run ``scenario``; returns the reasons the runs it started recorded (failed runs only)."""
        cloud = self.cloud
        if scenario in ("good", "user", "half-commit"):
            ctx: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
            if scenario == "half-commit":
                ctx = _commit_fault(cloud, "crash:after_partitions=1")
            with ctx:
                self._pair(scenario)
                finished = cloud.wait(timeout=600)
            if scenario == "user":
                self._read_as_user(finished)
        elif scenario == "bad":
            self._pair("bad", mismatch=True)
            finished = cloud.wait(timeout=600)
        elif scenario == "crash":
            with worker_fault(cloud, "exit:code=1"):
                self._pair("crash")
                finished = cloud.wait(timeout=600)
        elif scenario == "dead-letter":
            with _function_env(cloud, "StartRun", {"SETTLE_QUEUE_URL": f"{cloud.endpoint}/123456789012/gone.fifo"}):
                self._pair("dead-letter")
                finished = cloud.wait(timeout=600)
        elif scenario in ("unrecorded", "backstop-dead-letter"):
            with contextlib.ExitStack() as stack:
                stack.enter_context(_function_env(cloud, "RecordFailure", {"GLUE_DATABASE": None}))
                if scenario == "backstop-dead-letter":
                    stack.enter_context(_function_env(cloud, "RecordRunEnd", {"GLUE_DATABASE": None}))
                self._pair(scenario, mismatch=True)
                finished = cloud.wait(timeout=600)
        elif scenario in MAINTENANCE:
            self._pair(scenario)
            cloud.wait(timeout=600)
            return self._maintain(scenario)
        elif scenario == "rejected":
            self.n += 1
            path = self.work / f"sheet-{self.n}.csv"
            path.write_text(f"sample,fastq_2\ns{self.n},x.fastq.gz\n")
            cloud.upload(path, f"incoming/rejected-{self.n}/samplesheet.csv")
            finished = cloud.wait(timeout=600)
        else:
            raise ValueError(f"no scenario {scenario}")
        return [r for r in (_reason(cloud, e.name) for e in finished) if r]

    def _maintain(self, scenario: str) -> list[str]:
        """Invoke the scenario's maintenance function on the run just made (its sample ``s<n>``); its error,
        if it failed."""
        env: dict[str, str | None] = {}
        if scenario == "delete-sample":
            name, event = "DeleteSample", {"sample": f"s{self.n}", "confirm": f"s{self.n}"}
        else:
            name, event, env = "Compact", {}, {"SNAPSHOT_RETENTION_DAYS": "0"}
        with _function_env(self.cloud, name, env):
            assert self.cloud.lambdas is not None
            function = next(n for n in self.cloud.lambdas.functions if name in n)
            answer = self.cloud.client("lambda").invoke(FunctionName=function, Payload=json.dumps(event).encode())
        body = json.loads(answer["Payload"].read() or b"{}")
        return [str(body.get("errorMessage"))] if answer.get("FunctionError") else []

    def _read_as_user(self, finished: list[Any]) -> None:
        from seqlake.local.commands import _named_queries, athena_query

        for _, sql in _named_queries(self.cloud)[:1]:
            athena_query(self.cloud, sql)
        s3 = self.cloud.user_client("s3")
        for e in finished:
            run = RunLayout.in_bucket(self.cloud.bucket, e.name)
            for uri in (run.status, run.report):
                s3.get_object(Bucket=self.cloud.bucket, Key=uri.removeprefix(f"s3://{self.cloud.bucket}/"))


def _reason(cloud: LocalCloud, run_id: str) -> str:
    with contextlib.suppress(Exception):
        key = RunLayout.in_bucket(cloud.bucket, run_id).status.removeprefix(f"s3://{cloud.bucket}/")
        body = cloud.client("s3").get_object(Bucket=cloud.bucket, Key=key)["Body"].read()
        return str(json.loads(body).get("reason") or "")
    return ""


@contextlib.contextmanager
def _function_env(cloud: LocalCloud, function: str, changes: dict[str, str | None]) -> Iterator[None]:
    """The function whose name contains ``function`` with ``changes`` in its environment (None: unset), meanwhile."""
    from dataclasses import replace

    assert cloud.lambdas is not None
    name = next(n for n in cloud.lambdas.functions if function in n)
    before = cloud.lambdas.functions[name]
    lam = cloud.client("lambda")

    def configure(env: dict[str, str]) -> None:
        assert cloud.lambdas is not None
        lam.update_function_configuration(FunctionName=name, Environment={"Variables": env})
        cloud.lambdas.update(replace(before, environment=env))

    configure({k: v for k, v in {**before.environment, **changes}.items() if v is not None})
    try:
        yield
    finally:
        configure(dict(before.environment))


def _commit_fault(cloud: LocalCloud, spec: str) -> contextlib.AbstractContextManager[None]:
    from seqlake.base import faults

    return _function_env(cloud, "Commit", {faults.COMMIT_VAR: spec})


def _covers(grant: Grant, action: str, resource: str) -> bool:
    """Whether the refused request is one the statement allowed: its action and its resource (a refusal
    the scenario provokes itself, such as a send to a queue that is gone, is not the statement's)."""
    found = grant.statement.get("Resource", [])
    resources = [found] if isinstance(found, str) else list(found)
    return any(wildcard_match(a, action, case=False) for a in grant.actions) and any(
        wildcard_match(r, resource) for r in resources
    )


def sweep(cloud: LocalCloud, work: Path, roles: list[str] | None = None, say: Callable[[str], None] = print,
          labels: list[str] | None = None) -> tuple[list[Finding], list[str]]:
    found, aws_managed = grants(cloud)
    runs = Runs(cloud, work)
    findings = []
    for grant in found:
        if (roles and grant.role not in roles) or (labels and grant.label not in labels):
            continue
        t0 = time.monotonic()
        finding = Finding(grant, "unexplained")
        with without(cloud, grant):
            for scenario in scenarios_for(grant.role):
                before = len(cloud.iam.denied)
                try:
                    reasons = runs.run(scenario)
                except Exception as err:  # a refused upload or query: the scenario ends there
                    say(f"  {scenario}: {type(err).__name__}: {str(err)[:200]}")
                    reasons = []
                denied = [(a, r) for caller, a, r in cloud.iam.denied[before:]
                          if f"assumed-role/{grant.role_name}/" in caller and _covers(grant, a, r)]
                if denied:
                    finding = Finding(grant, "needed", scenario, denied, reasons)
                    break
        reason = NOT_EXERCISED.get((grant.role, grant.label))
        if finding.outcome == "needed" and reason:
            finding.note = f"stale NOT_EXERCISED entry: {reason}"
        elif finding.outcome != "needed" and reason:
            finding.outcome, finding.note = "not exercised locally", reason
        say(f"{grant.role} {grant.label}: {finding.outcome} {finding.scenario} {finding.denied[:1]} "
            f"({time.monotonic() - t0:.0f} s)")
        findings.append(finding)
    return findings, aws_managed


def report(findings: list[Finding], aws_managed: list[str]) -> str:
    lines = [
        "# Each grant needed",
        "",
        "Written by `make grants` (`python -m seqlake.local.grants`): on the local cloud with IAM enforced, each "
        "statement of each deployed role removed in turn, and the scenarios below run until one is refused naming "
        "one of its actions. *run's reason* says whether a run that failed recorded the refused action as its "
        "`reason` (a child's last line, a failed step's cause); the start function and the failure step cannot "
        "record their own failure. Statements that exist only with `KmsKeyArn` or `AllowedInputBuckets` set are "
        "not deployed locally.",
        "",
        *[f"- **{name}**: {what}" for name, what in SCENARIOS.items()],
        "",
        "| role | statement | actions | outcome | run | refused (action on resource) | run's reason names the action |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in findings:
        refused = f"{f.denied[0][0]} on {f.denied[0][1]}" if f.denied else f.note
        recorded = "yes" if any(a in r for a, _ in f.denied for r in f.reasons) else "-"
        lines.append(f"| {f.grant.role} | {f.grant.label} | {', '.join(f.grant.actions)} | {f.outcome} | "
                     f"{f.scenario} | {refused} | {recorded} |")
    lines += ["", "AWS managed policies (AWS's to change; not swept): " + "; ".join(aws_managed)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    doc = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="python -m seqlake.local.grants", description=doc)
    parser.add_argument("--role", action="append", help="only this role (logical id); repeatable")
    parser.add_argument("--statement", action="append", help="only this statement (Sid, or POLICY[i]); repeatable")
    parser.add_argument("--report", type=Path, help="write the table (Markdown) here")
    args = parser.parse_args(argv)
    with (tempfile.TemporaryDirectory(prefix="seqlake-grants-") as tmp,
          local_cloud(state=StateDir(Path(tmp) / "home"), jobs=2, quiet=True) as cloud):
        if not cloud.iam.enforce:
            print(f"{iam.var()} turns IAM enforcement off: nothing to sweep", file=sys.stderr)
            return 2
        findings, aws_managed = sweep(cloud, Path(tmp), args.role, labels=args.statement)
    table = report(findings, aws_managed)
    if args.report:
        args.report.write_text(table)
    print(table)
    bad = [f for f in findings if f.outcome == "unexplained" or f.note.startswith("stale")]
    for f in bad:
        why = f.note or "no run needs it and no reason is written"
        print(f"{f.grant.role} {f.grant.label}: {why}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
