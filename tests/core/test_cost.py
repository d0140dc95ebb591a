"""The cost model: vCPU-hours at a price per vCPU-hour, the one docs/COST.md describes and quotes."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqlake.aws.status import RunStatus
from seqlake.base import cost

COST_MD = Path(__file__).resolve().parents[2] / "docs" / "COST.md"


def test_an_hour_of_a_vcpu_costs_its_price() -> None:
    assert cost.compute_cost_usd(3600) == cost.SPOT_USD_PER_VCPU_HOUR
    assert cost.compute_cost_usd(7200, spot=False) == pytest.approx(2 * cost.ON_DEMAND_USD_PER_VCPU_HOUR)
    assert cost.ON_DEMAND_USD_PER_VCPU_HOUR > cost.SPOT_USD_PER_VCPU_HOUR


def test_the_runs_table_uses_the_model_the_docs_quote() -> None:
    status = RunStatus(run_id="r", state="SUCCEEDED", bucket="b", samples=["s"], inputs=[], vcpu_seconds=5400.0)
    status.finish()
    assert status.cost_estimate_usd == cost.compute_cost_usd(5400.0)
    text = COST_MD.read_text()
    for price in (cost.SPOT_USD_PER_VCPU_HOUR, cost.ON_DEMAND_USD_PER_VCPU_HOUR):
        assert f"**${price:.3f}**" in text
