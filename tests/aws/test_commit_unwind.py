"""The commit's unwind (``steps.register_all_or_none``): a cleanup that fails is logged, and the error
that made the commit unwind is the one raised."""

from __future__ import annotations

from typing import Any

import pytest

from seqlake.aws import steps


class _Glue:
    """A Glue client whose partition deletes fail as a throttled or lost connection would."""

    def __init__(self) -> None:
        self.deletes: list[str] = []

    def batch_delete_partition(self, **kw: Any) -> dict[str, Any]:
        self.deletes.append(kw["TableName"])
        raise ConnectionError(f"could not reach Glue to delete from {kw['TableName']}")


def test_a_failed_cleanup_is_logged_and_the_original_error_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[str] = []

    def register_run(database: str, bucket: str, run_id: str, tables: list[str]) -> list[str]:
        if tables == ["coverage"]:
            raise RuntimeError("Glue refused the coverage partition")
        registered.extend(tables)
        return tables

    glue = _Glue()
    warnings: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(steps.catalog, "register_run", register_run)
    monkeypatch.setattr(steps.clients, "client", lambda name: glue)
    monkeypatch.setattr(steps.logger, "warning", lambda msg, extra: warnings.append((msg, extra)))
    with pytest.raises(RuntimeError, match="Glue refused the coverage partition"):
        steps.register_all_or_none("db", "bkt", "run-1", ["qc_summary", "alignments", "coverage"])
    # every table registered before the failure was unwound, each failed delete logged
    assert glue.deletes == registered == ["qc_summary", "alignments"]
    assert [extra["table"] for _, extra in warnings] == ["qc_summary", "alignments"]
    assert all("ConnectionError" in extra["error"] and extra["run_id"] == "run-1" for _, extra in warnings)
