-- Every run, newest first: state, samples, shards, retries, reads, duration, cost and why it failed (or was rejected).
SELECT
  run_id,
  state,
  samples,
  shards,
  retried_shards,
  reads,
  bases,
  round(duration_s, 1) AS duration_s,
  round(cost_estimate_usd, 4) AS cost_estimate_usd,
  started_at,
  failed_shard,
  reason
FROM runs
ORDER BY started_at DESC
