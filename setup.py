"""The wheel carries the app's deployable files as package data, in ``seqlake/local/app/``: the template,
the functions' code folders, the state machine and the named queries, exactly the files of the checkout's
root that the local cloud deploys (:mod:`seqlake.local.appdir` finds them). An installed
``seqlake[local]`` then runs ``seqlake demo`` outside any checkout. Everything else is in ``pyproject.toml``;
``MANIFEST.in`` puts the same files into a source distribution.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: the app's files, relative to the checkout's root (template.yaml names the folders it deploys)
APP_FILES = (
    "template.yaml",
    "statemachines/*.asl.json",
    "queries/*.sql",
    "functions/*/*.py",
    "functions/*/requirements.txt",
)
#: where they go in the package
APP_PACKAGE_DIR = Path("seqlake", "local", "app")


class BuildPyWithApp(build_py):
    """``build_py``, then the app's files copied beside the modules."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / APP_PACKAGE_DIR
        # a build folder left by an earlier build may hold files the checkout no longer has
        shutil.rmtree(target, ignore_errors=True)
        for pattern in APP_FILES:
            for path in sorted(ROOT.glob(pattern)):
                dest = target / path.relative_to(ROOT)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)


setup(cmdclass={"build_py": BuildPyWithApp})
