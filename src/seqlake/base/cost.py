"""What a run costs: vCPU-hours times a price per vCPU-hour (the model of docs/COST.md).

AWS bills an instance, not a job: the model charges each child its job's vCPUs for its wall time, the
share of an instance it holds (an r-family instance's memory per vCPU matches the job's, see
docs/DEPLOY.md "Compute"). It leaves out what is small beside compute for any run of more than a few
shards (Lambda, Step Functions, S3 requests, CloudWatch Logs) and the time an instance idles between
jobs. Prices are us-east-1, Linux, for the template's default families (r5, r6i, r6a, r7i, r7a,
``.large`` = 2 vCPUs); docs/COST.md gives their sources and dates, and how far an estimate can be off.
"""

from __future__ import annotations

#: Spot, per vCPU-hour: Spot prices move with supply; the template's families in us-east-1 mostly
#: sell at 65-75 % below On-Demand (r6i.large about $0.030-0.045 an hour)
SPOT_USD_PER_VCPU_HOUR = 0.018
#: On-Demand, per vCPU-hour: r6i.large / r5.large list price $0.126 an hour for 2 vCPUs
ON_DEMAND_USD_PER_VCPU_HOUR = 0.063


def compute_cost_usd(vcpu_seconds: float, *, spot: bool = True) -> float:
    """The compute cost of ``vcpu_seconds`` (the jobs' vCPUs times their wall time)."""
    price = SPOT_USD_PER_VCPU_HOUR if spot else ON_DEMAND_USD_PER_VCPU_HOUR
    return round(vcpu_seconds / 3600 * price, 6)
