"""Packaging, SAM translation and the deployer's intrinsic functions (no moto needed)."""

from __future__ import annotations

import base64
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from localcloud.deployer import Deployer
from localcloud.deployment import state_machine_functions
from localcloud.packaging import load_template, package, zip_folder
from localcloud.translate import translate

APP = Path(__file__).resolve().parent / "fixtures" / "app"
REPO = Path(__file__).resolve().parents[2]


def test_package_zips_code_and_inlines_the_state_machine() -> None:
    puts: list[tuple[str, str, bytes]] = []
    packaged = package(load_template(APP / "template.yaml"), APP, lambda b, k, body: puts.append((b, k, body)))
    res = packaged.template["Resources"]
    assert res["PipelineStateMachine"]["Properties"]["Definition"]["StartAt"] == "Plan"
    assert "DefinitionUri" not in res["PipelineStateMachine"]["Properties"]
    assert res["PlanFunction"]["Properties"]["CodeUri"].startswith("s3://")
    assert set(packaged.code_dirs) == {"StartRunFunction", "PlanFunction", "CommitFunction"}
    names = zipfile.ZipFile(io.BytesIO(puts[0][2])).namelist()
    assert names == ["app.py"]
    assert zip_folder(APP / "functions" / "plan") == zip_folder(APP / "functions" / "plan")  # deterministic


def test_translate_needs_no_credentials() -> None:
    cfn = translate(package(load_template(APP / "template.yaml"), APP).template)
    types = {r["Type"] for r in cfn["Resources"].values()}
    assert "AWS::Serverless::Function" not in types
    assert {"AWS::Lambda::Function", "AWS::Events::Rule", "AWS::StepFunctions::StateMachine"} <= types


def _deployer(extra: dict[str, Any] | None = None) -> Deployer:
    template = {
        "Parameters": {
            "Stage": {"Type": "String", "Default": "dev"},
            "N": {"Type": "Number", "Default": 3},
            "Subnets": {"Type": "CommaDelimitedList", "Default": "a, b"},
        },
        "Conditions": {
            "IsProd": {"Fn::Equals": [{"Ref": "Stage"}, "prod"]},
            "NotProd": {"Fn::Not": [{"Condition": "IsProd"}]},
        },
        "Resources": {},
        **(extra or {}),
    }
    d = Deployer(template)
    d.physical["Bucket"] = "bkt"
    d.attrs["Bucket"] = {"Arn": "arn:aws:s3:::bkt"}
    return d


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ({"Ref": "N"}, "3"),
        ({"Ref": "Subnets"}, ["a", "b"]),
        ({"Fn::Sub": "s3://${Bucket}/${AWS::Region}/${!Literal}"}, "s3://bkt/us-east-1/${Literal}"),
        ({"Fn::Sub": "${Bucket.Arn}/*"}, "arn:aws:s3:::bkt/*"),
        ({"Fn::Sub": ["${X}-${Stage}", {"X": {"Ref": "Bucket"}}]}, "bkt-dev"),
        ({"Fn::GetAtt": ["Bucket", "Arn"]}, "arn:aws:s3:::bkt"),
        ({"Fn::Join": [",", ["a", {"Ref": "Stage"}]]}, "a,dev"),
        ({"Fn::Select": [1, {"Fn::Split": ["/", "x/y/z"]}]}, "y"),
        ({"Fn::If": ["IsProd", "p", "d"]}, "d"),
        ([{"Fn::If": ["IsProd", "p", {"Ref": "AWS::NoValue"}]}, "kept"], ["kept"]),
        ({"Fn::Base64": "hi"}, base64.b64encode(b"hi").decode()),
    ],
)
def test_intrinsics(node: Any, expected: Any) -> None:
    assert _deployer().resolve(node) == expected


def test_conditions_and_unknown_types_fail_loudly() -> None:
    d = _deployer()
    assert d.conditions == {"IsProd": False, "NotProd": True}
    with pytest.raises(NotImplementedError, match="Fn::Cidr"):
        d.resolve({"Fn::Cidr": ["10.0.0.0/16", 4, 8]})
    mapped = _deployer({"Mappings": {"M": {"us-east-1": {"v": "r5d,r6id"}}}, "Resources": {}})
    assert mapped.resolve({"Fn::FindInMap": ["M", {"Ref": "AWS::Region"}, "v"]}) == "r5d,r6id"
    unknown = _deployer({"Resources": {"Thing": {"Type": "AWS::Kinesis::Stream", "Properties": {}}}})
    with pytest.raises(NotImplementedError, match="no creator for AWS::Kinesis::Stream"):
        unknown.deploy()
    skipped = _deployer({"Resources": {"Thing": {"Type": "AWS::Kinesis::Stream", "Condition": "IsProd"}}})
    assert skipped.deploy() == {}


def test_missing_parameter_value() -> None:
    with pytest.raises(ValueError, match="Subnets"):
        Deployer({"Parameters": {"Subnets": {"Type": "List<AWS::EC2::Subnet::Id>"}}, "Resources": {}})


def test_functions_only_a_failed_run_calls_are_told_apart() -> None:
    text = (Path(__file__).resolve().parents[2] / "statemachines" / "pipeline.asl.json").read_text()

    def arn(m: re.Match[str]) -> str:
        name = m.group(1)
        if name.endswith("FunctionArn"):
            return f"arn:aws:lambda:us-east-1:123456789012:function:{name.removesuffix('Arn')}"
        return {"LambdaInvoke": "arn:aws:states:::lambda:invoke"}.get(name, f"arn:aws:states:::{name}")

    called, on_success = state_machine_functions(json.loads(re.sub(r"\$\{(\w+)\}", arn, text)))
    assert called - on_success == {"RecordFailureFunction"}
    assert {"PlanFunction", "CommitFunction"} <= on_success


def test_template_loader_reads_what_samtranslator_reads(tmp_path: Path) -> None:
    """libyaml with the short-form intrinsics gives samtranslator's own parse."""
    from samtranslator.yaml_helper import yaml_parse

    for path in (REPO / "template.yaml", APP / "template.yaml"):
        assert load_template(path) == yaml_parse(path.read_text())
    odd = tmp_path / "t.yaml"
    odd.write_text("Resources:\n  B:\n    Type: X\n    Properties:\n      A: !GetAtt R.Arn\n      S: !Sub '${x}'\n")
    props = load_template(odd)["Resources"]["B"]["Properties"]
    assert props == {"A": {"Fn::GetAtt": ["R", "Arn"]}, "S": {"Fn::Sub": "${x}"}}
    with pytest.raises(ValueError, match="no Resources"):
        odd.write_text("a: 1\n")
        load_template(odd)
