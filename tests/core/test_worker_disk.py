"""A child whose disk fills says so in its last line, with what to raise: the failed run's reason."""

from __future__ import annotations

import errno

import pytest

from seqlake.base.errors import EXIT_FAILURE
from seqlake.child import worker_main


def test_a_full_disk_is_the_childs_last_line_with_what_to_raise(capsys: pytest.CaptureFixture[str]) -> None:
    err = OSError(errno.ENOSPC, "No space left on device", "/scratch/spill/run-00012.counts")
    assert worker_main._failed(None, 3, err) == EXIT_FAILURE
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("seqlake: no space left on the child's disk (/scratch/spill/run-00012.counts)")
    assert "RootVolumeGiB" in last and "ReadsPerShard" in last


def test_any_other_os_error_is_raised_on() -> None:
    with pytest.raises(OSError, match="Permission denied"):
        worker_main._failed(None, 3, OSError(errno.EACCES, "Permission denied"))
