"""The app's files ship in the wheel, so that an installed ``seqlake[local]`` runs the local cloud."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from localcloud.packaging import load_template, package
from seqlake.base.errors import SeqlakeError
from seqlake.local import appdir

ROOT = Path(__file__).resolve().parents[2]
APP_IN_WHEEL = "seqlake/local/app/"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (found,) = out.glob("seqlake-*.whl")
    return found


def test_the_wheel_carries_a_deployable_app(wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.startswith(APP_IN_WHEEL)]
        z.extractall(tmp_path, names)
    app = tmp_path / APP_IN_WHEEL
    # everything the template names is there: the functions' folders and the state machine
    packaged = package(load_template(app / appdir.TEMPLATE), app)
    functions = {r["Properties"]["CodeUri"] for r in load_template(ROOT / appdir.TEMPLATE)["Resources"].values()
                 if r["Type"] == "AWS::Serverless::Function"}
    assert {p.relative_to(app).as_posix() + "/" for p in packaged.code_dirs.values()} == functions
    assert all((d / "app.py").is_file() for d in packaged.code_dirs.values())
    assert any("Definition" in r.get("Properties", {}) for r in packaged.template["Resources"].values())
    queries = sorted(p.name for p in (ROOT / appdir.QUERIES).glob("*.sql"))
    assert queries and sorted(p.name for p in (app / appdir.QUERIES).glob("*.sql")) == queries
    assert not [n for n in names if "__pycache__" in n]
    # SEQLAKE_APP_DIR names such a folder
    monkeypatch.setenv(appdir.VAR, str(app))
    assert appdir.app_dir() == app and appdir.queries_dir() == app / appdir.QUERIES


def test_app_dir_is_the_checkout_here_and_refuses_a_folder_without_a_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(appdir.VAR, raising=False)
    assert appdir.app_dir() == ROOT
    monkeypatch.setenv(appdir.VAR, str(tmp_path))
    with pytest.raises(SeqlakeError, match=r"no template\.yaml"):
        appdir.app_dir()


def test_the_local_cloud_is_a_wheel_of_its_own(wheel: Path, tmp_path: Path) -> None:
    """seqlake's wheel carries the adapter (``seqlake/local``) but not the local cloud; the local cloud's wheel
    (``localcloud/``, its own version and moto pin) carries nothing of seqlake."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "seqlake/local/adapter.py" in names and not [n for n in names if n.startswith("localcloud/")]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path),
                    str(ROOT / "localcloud")], check=True, capture_output=True)
    (found,) = tmp_path.glob("localcloud-*.whl")
    with zipfile.ZipFile(found) as z:
        names = z.namelist()
        metadata = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "localcloud/cloud.py" in names and "localcloud/patches.py" in names
    assert not [n for n in names if n.startswith("seqlake/")]
    assert "Requires-Dist: moto[" in metadata and "==5.2.6" in metadata
