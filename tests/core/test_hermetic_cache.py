"""The test session never touches the user's cache folder (tests/conftest.py gives it one of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from seqlake import demo_data
from seqlake.base.cachedir import CACHE_VAR, REF_CACHE_VAR, reference_cache, user_cache_dir
from seqlake.plan.refindex import indexed_reference


def _users_cache() -> Path:
    """Where the cache would be without the session's: ``$XDG_CACHE_HOME/seqlake`` or ``~/.cache/seqlake``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seqlake"


def test_the_session_caches_in_a_folder_of_its_own() -> None:
    ours = user_cache_dir()
    session = ours.parent  # a new one, made by the session, in the system's temporary folder, beside its home
    assert session.name.startswith("seqlake-test-") and ours.is_dir(), ours
    assert Path(os.environ["HOME"]) == session / "home" and Path(tempfile.gettempdir()) == session / "tmp"
    assert ours != _users_cache() and reference_cache() == ours and REF_CACHE_VAR not in os.environ
    # and a process a test starts (the command line, the local cloud's children) inherits it
    told = subprocess.run([sys.executable, "-c", "from seqlake.base.cachedir import reference_cache as r; "
                           "print(r())"], capture_output=True, text=True, check=True).stdout.strip()
    assert told == os.environ[CACHE_VAR] == str(ours)


def test_a_reference_index_is_built_in_the_sessions_cache(tmp_path: Path) -> None:
    # a reference no other test indexes (its own content: its own key), so this session builds its index
    fasta = tmp_path / "own.fasta"
    fasta.write_bytes(demo_data.reference_path().read_bytes().replace(b">", b">hermetic_", 1))
    pin = indexed_reference(str(fasta))
    assert Path(pin.index_uri).is_relative_to(user_cache_dir()) and Path(pin.index_uri).is_file()
    assert not Path(pin.index_uri).is_relative_to(_users_cache())


def test_the_session_has_its_own_home_xdg_folders_and_temporary_folder() -> None:
    """What the user's tools would write (matplotlib's, DuckDB's, Chromium's, pip's files) goes to the
    session's folder, in the test process and in every process it starts; git reads no user configuration."""
    script = ("import os, tempfile; from pathlib import Path; "
              "print(Path.home(), os.environ['XDG_CACHE_HOME'], os.environ['XDG_CONFIG_HOME'], tempfile.gettempdir())")
    told = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    session = user_cache_dir().parent
    assert told == [str(session / "home"), str(session / "home/.cache"), str(session / "home/.config"),
                    str(session / "tmp")]
    assert os.environ["GIT_CONFIG_GLOBAL"] == os.devnull

