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


def _dollars_rows() -> list[list[str]]:
    lines = COST_MD.read_text().split("## Dollars", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = lines[start:next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))]
    return [[c.strip().strip("*") for c in line.strip().strip("|").split("|")] for line in table[2:]]


def _bounds(text: str) -> list[str]:
    return text.lstrip("$").split("-")


def test_the_dollars_table_is_its_vcpu_hours_at_the_models_prices() -> None:
    """Every figure of COST.md's Dollars table is its row's vCPU-hours at cost.py's prices, rounded as shown:
    a price changed in one place and not recomputed on the page fails here."""
    rows = _dollars_rows()
    assert len(rows) >= 4
    for name, _bases, hours, spot, on_demand in rows:
        for shown, price in ((spot, cost.SPOT_USD_PER_VCPU_HOUR), (on_demand, cost.ON_DEMAND_USD_PER_VCPU_HOUR)):
            hour_bounds, dollar_bounds = _bounds(hours), _bounds(shown)
            for h, s in zip(hour_bounds, dollar_bounds, strict=True):
                decimals = len(s.split(".")[1])
                assert f"{float(h) * price:.{decimals}f}" == s, (name, h, s, price)
