"""A fair-share job queue and a quick job definition on a local cloud's Batch, for the tests of what Batch refuses
(test_rules: the rules themselves; test_patches: the patch that makes moto apply them)."""

from __future__ import annotations

from typing import Any


def fair_share_queue(batch: Any, name: str) -> str:
    """A queue with a fair-share scheduling policy over the stack's first queue's compute environments."""
    fifo = batch.describe_job_queues()["jobQueues"][0]
    policy = batch.create_scheduling_policy(name=f"{name}-policy", fairsharePolicy={"shareDecaySeconds": 600})
    queue: str = batch.create_job_queue(jobQueueName=name, state="ENABLED", priority=1,
                                        schedulingPolicyArn=policy["arn"],
                                        computeEnvironmentOrder=fifo["computeEnvironmentOrder"])["jobQueueArn"]
    return queue


def quick_definition(batch: Any, name: str, **extra: Any) -> str:
    """A job definition whose job exits at once (1 vCPU, 256 MiB), with ``extra`` fields of the registration."""
    arn: str = batch.register_job_definition(
        jobDefinitionName=name, type="container",
        containerProperties={"image": "local/worker", "command": ["python", "-c", "pass"],
                             "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                      {"type": "MEMORY", "value": "256"}]},
        **extra)["jobDefinitionArn"]
    return arn
