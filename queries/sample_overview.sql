-- One row per sample, from its latest run (the run that committed last; sample_summary_latest): the figures a lab reads first.
SELECT
  run_id,
  sample,
  committed_at,
  read_pairs_raw,
  round(pct_q30, 2) AS pct_q30,
  round(mean_quality, 2) AS mean_quality,
  reads_adapter_8bp,
  round(pct_mapped, 2) AS pct_mapped,
  round(pct_properly_paired, 2) AS pct_properly_paired,
  round(mean_depth, 1) AS mean_depth,
  round(pct_genome_1x, 2) AS pct_genome_1x,
  round(pct_genome_10x, 2) AS pct_genome_10x,
  round(pct_genome_30x, 2) AS pct_genome_30x,
  median_insert_size,
  round(pct_error, 3) AS pct_error,
  control
FROM sample_summary_latest
ORDER BY sample
