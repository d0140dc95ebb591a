-- Alignment QC per sample as samtools stats gives it: mapped and properly paired rates, insert size, error rate, MAPQ.
SELECT
  run_id,
  sample,
  round(pct_mapped, 2) AS pct_mapped,
  round(pct_properly_paired, 2) AS pct_properly_paired,
  median_insert_size,
  round(pct_error, 3) AS pct_error,
  round(mean_mapq, 1) AS mean_mapq,
  soft_clipped_bases
FROM sample_summary
WHERE pct_mapped IS NOT NULL
ORDER BY run_id, sample
