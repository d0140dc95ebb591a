-- Regions below 10x depth per sample and contig, exact and merged (1-based inclusive, as IGV and samtools regions).
SELECT
  run_id,
  sample,
  contig,
  pos,
  end_pos,
  length
FROM low_coverage
WHERE threshold = 10
ORDER BY run_id, sample, contig, pos
