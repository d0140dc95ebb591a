-- Coverage gaps: reference bins whose mean depth is below 10x, with the neighbouring depth context.
SELECT
  run_id,
  sample,
  contig,
  bin_start + 1 AS start_1based,
  bin_end AS end_1based,
  round(mean_depth, 2) AS mean_depth,
  round(100.0 * covered_bases / (bin_end - bin_start), 1) AS pct_covered
FROM coverage
WHERE mean_depth < 10
ORDER BY run_id, sample, contig, bin_start
