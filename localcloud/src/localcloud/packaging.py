"""An offline stand-in for ``sam package``.

Each function's local ``CodeUri`` folder is zipped and put in an artifact bucket (moto's
``CreateFunction`` needs the code object to exist), and each state machine's local ``DefinitionUri``
file is inlined as ``Definition`` so that its ``DefinitionSubstitutions`` are applied by the deployer
exactly as CloudFormation applies them. The folders are returned too: the local Lambda runner
imports the handler from the folder itself, so edits take effect without re-packaging.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from samtranslator.yaml_helper import intrinsics_multi_constructor

ARTIFACT_BUCKET = "localcloud-artifacts"

PutObject = Callable[[str, str, bytes], None]


class _TemplateLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader (10x the pure-Python one) with samtranslator's short-form tags (``!Ref``,
    ``!Sub``, ...) as intrinsics; unlike ``samtranslator.yaml_helper.yaml_parse``, it leaves PyYAML's
    global ``SafeLoader`` alone."""


_TemplateLoader.add_multi_constructor("!", intrinsics_multi_constructor)


def load_template(path: Path) -> dict[str, Any]:
    doc = yaml.load(path.read_text(), Loader=_TemplateLoader)  # noqa: S506 - a safe loader
    if not isinstance(doc, dict) or "Resources" not in doc:
        raise ValueError(f"{path}: not a CloudFormation / SAM template (no Resources)")
    return doc


def zip_folder(folder: Path) -> bytes:
    """Deterministic zip of a folder (sorted names, fixed timestamps), without ``__pycache__``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                info = zipfile.ZipInfo(p.relative_to(folder).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                z.writestr(info, p.read_bytes(), zipfile.ZIP_DEFLATED)
    return buf.getvalue()


_EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18


@dataclass(frozen=True)
class Packaged:
    template: dict[str, Any]
    #: function logical id -> its code folder
    code_dirs: dict[str, Path]


def _is_local(uri: Any) -> bool:
    return isinstance(uri, str) and not uri.startswith("s3://")


def package(template: dict[str, Any], base_dir: Path, put_object: PutObject | None = None) -> Packaged:
    tpl = copy.deepcopy(template)
    code_dirs: dict[str, Path] = {}
    global_code = tpl.get("Globals", {}).get("Function", {}).get("CodeUri")
    for lid, res in tpl["Resources"].items():
        props = res.setdefault("Properties", {})
        if res.get("Type") == "AWS::Serverless::Function":
            uri = props.get("CodeUri", global_code)
            if _is_local(uri):
                folder = (base_dir / uri).resolve()
                if not folder.is_dir():
                    raise FileNotFoundError(f"{lid}: CodeUri {uri} is not a folder under {base_dir}")
                body = zip_folder(folder)
                key = f"{lid}/{hashlib.sha256(body).hexdigest()[:16]}.zip"
                if put_object is not None:
                    put_object(ARTIFACT_BUCKET, key, body)
                props["CodeUri"] = f"s3://{ARTIFACT_BUCKET}/{key}"
                code_dirs[lid] = folder
        elif res.get("Type") == "AWS::Serverless::LayerVersion" and _is_local(props.get("ContentUri")):
            # locally src/ on PYTHONPATH stands in for the layer: an empty placeholder saves zipping it
            key = f"{lid}/local-placeholder.zip"
            if put_object is not None:
                put_object(ARTIFACT_BUCKET, key, _EMPTY_ZIP)
            props["ContentUri"] = f"s3://{ARTIFACT_BUCKET}/{key}"
        elif res.get("Type") == "AWS::Serverless::StateMachine" and _is_local(props.get("DefinitionUri")):
            path = base_dir / props.pop("DefinitionUri")
            text = path.read_text()
            props["Definition"] = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return Packaged(tpl, code_dirs)
