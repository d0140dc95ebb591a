-- Per run and sample, how many amplicons dropped out (no read of their own, or mean depth below 20x) and the share of reads no primer clipped (reads outside any amplicon).
-- view columns: run_id string, sample string, low_amplicons bigint, amplicons bigint, reads_outside_amplicons bigint, pct_reads_outside_amplicons double, misprimed_reads bigint
SELECT
  run_id,
  sample,
  count_if(dropout) AS low_amplicons,
  count_if(amplicon IS NOT NULL) AS amplicons,
  sum(CASE WHEN amplicon IS NULL THEN reads ELSE 0 END) AS reads_outside_amplicons,
  round(100 * CAST(sum(CASE WHEN amplicon IS NULL THEN reads ELSE 0 END) AS double) / nullif(sum(reads), 0), 2)
    AS pct_reads_outside_amplicons,
  sum(misprimed_reads) AS misprimed_reads
FROM amplicon_depth
GROUP BY run_id, sample
