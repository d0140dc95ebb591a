-- Mean Phred quality and base composition per cycle (FastQC's per-base plots), before and after trimming.
SELECT
  run_id,
  sample,
  mate,
  stage,
  cycle,
  reads,
  round(CAST(qual_sum AS double) / nullif(reads, 0), 2) AS mean_quality,
  round(100.0 * (g + c) / nullif(a + c + g + t, 0), 2) AS pct_gc,
  round(100.0 * n / nullif(a + c + g + t + n, 0), 3) AS pct_n
FROM qc_position
ORDER BY run_id, sample, mate, stage, cycle
