-- Amplicons that dropped out (no read of their own, or below 20x mean depth) per run and sample (amplicon mode: runs with a primer_bed), the worst first, with the reads their primers clipped.
SELECT
  run_id,
  sample,
  amplicon,
  pool,
  contig,
  pos,
  end_pos,
  reads,
  misprimed_reads,
  round(mean_pileup_depth, 1) AS mean_pileup_depth,
  min_pileup_depth
FROM amplicon_depth
WHERE dropout
ORDER BY run_id, sample, reads, mean_pileup_depth, pos
