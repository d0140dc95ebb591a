-- Alignment to the reference per sample: mapped and properly paired rates, mean MAPQ, depth, breadth.
SELECT
  run_id,
  sample,
  sum(reads) AS reads,
  sum(mapped_reads) AS mapped_reads,
  round(100.0 * sum(mapped_reads) / nullif(sum(reads), 0), 2) AS pct_mapped,
  round(100.0 * sum(properly_paired) / nullif(sum(reads), 0), 2) AS pct_properly_paired,
  round(avg(mean_mapq), 1) AS mean_mapq,
  round(max(mean_depth), 1) AS mean_depth,
  round(100.0 * max(breadth), 2) AS pct_breadth
FROM qc_summary
WHERE stage = 'trimmed' AND mapped_reads IS NOT NULL
GROUP BY run_id, sample
ORDER BY run_id, sample
