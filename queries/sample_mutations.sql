-- Each mutation (PASS calls, ivar 1.3.1 semantics) across samples and runs: how many samples with >= 90 % of the genome at >= 10x carry it, their mean allele fraction, first and last seen. Add e.g. AND v.pos = 23403 AND v.alt = 'G' (S:D614G) for one mutation.
SELECT
  v.contig,
  v.pos,
  v.ref,
  v.alt,
  v.type,
  count(DISTINCT v.sample) AS samples,
  count(DISTINCT v.run_id) AS runs,
  round(avg(v.alt_fraction), 3) AS mean_alt_fraction,
  min(s.committed_at) AS first_seen,
  max(s.committed_at) AS last_seen
FROM variants v
JOIN sample_summary s ON s.run_id = v.run_id AND s.sample = v.sample
WHERE v.pass AND s.pct_genome_10x >= 90
GROUP BY v.contig, v.pos, v.ref, v.alt, v.type
ORDER BY samples DESC, v.contig, v.pos
