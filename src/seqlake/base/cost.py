"""What a run costs: vCPU-hours times a price per vCPU-hour (the model of docs/COST.md).

AWS bills an instance, not a job: the model charges each child its job's vCPUs for its wall time, the
share of an instance it holds (an r-family instance's memory per vCPU matches the job's, see
docs/DEPLOY.md "Compute"). It leaves out what is small beside compute for any run of more than a few
shards (Lambda, Step Functions, S3 requests, CloudWatch Logs) and the time an instance idles between
jobs. Prices are us-east-1, Linux, for the template's default families, which carry the jobs' scratch on
NVMe instance store (r5d, r6id, r5ad, r5dn, r6idn; ``.large`` = 2 vCPUs): the disk is in the instance's
price. docs/COST.md gives their sources and dates, and how far an estimate can be off.
"""

from __future__ import annotations

#: Spot, per vCPU-hour: Spot prices move with supply; the template's families in us-east-1 mostly
#: sell at 65-75 % below On-Demand (r5d.large about $0.035-0.050 an hour)
SPOT_USD_PER_VCPU_HOUR = 0.022
#: On-Demand, per vCPU-hour: r5d.large's list price, $0.144 an hour for 2 vCPUs and 75 GB of instance store
#: (r5.large, without the disk, is $0.126: the scratch costs 14 %)
ON_DEMAND_USD_PER_VCPU_HOUR = 0.072


def compute_cost_usd(vcpu_seconds: float, *, spot: bool = True) -> float:
    """The compute cost of ``vcpu_seconds`` (the jobs' vCPUs times their wall time)."""
    price = SPOT_USD_PER_VCPU_HOUR if spot else ON_DEMAND_USD_PER_VCPU_HOUR
    return round(vcpu_seconds / 3600 * price, 6)
