-- Read QC per run, sample, mate and stage: reads, bases, length, Q30 and GC content, adapter trimming.
SELECT
  run_id,
  sample,
  mate,
  stage,
  reads,
  bases,
  min_len,
  max_len,
  round(avg_len, 1) AS avg_len,
  round(100.0 * q30_bases / nullif(bases, 0), 2) AS pct_q30,
  round(100.0 * gc_bases / nullif(bases, 0), 2) AS pct_gc,
  round(100.0 * n_bases / nullif(bases, 0), 3) AS pct_n,
  reads_adapter_trimmed,
  reads_too_short
FROM qc_summary
ORDER BY run_id, sample, mate, stage
