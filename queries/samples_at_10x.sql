-- Samples whose latest run has >= 90 % of the reference at >= 10x depth (the release criterion for viral consensus and bacterial WGS).
SELECT
  run_id,
  sample,
  round(pct_genome_10x, 2) AS pct_genome_10x,
  round(mean_depth, 1) AS mean_depth,
  control
FROM sample_summary_latest
WHERE pct_genome_10x >= 90
ORDER BY run_id, sample
