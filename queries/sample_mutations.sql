-- Mutations across samples and runs (PASS calls, ivar 1.3.1 semantics), in samples with >= 90 % of the genome at >= 10x: one row per run, sample and mutation, a mutation's samples together. Add e.g. AND v.pos = 23403 AND v.alt = 'G' (S:D614G) for one mutation.
SELECT
  v.run_id,
  v.sample,
  v.contig,
  v.pos,
  v.ref,
  v.alt,
  v.type,
  round(v.alt_fraction, 3) AS alt_fraction,
  v.depth,
  round(s.pct_genome_10x, 2) AS pct_genome_10x,
  s.committed_at
FROM variants v
JOIN sample_summary s ON s.run_id = v.run_id AND s.sample = v.sample
WHERE v.pass AND s.pct_genome_10x >= 90
ORDER BY v.contig, v.pos, v.ref, v.alt, s.committed_at, v.run_id, v.sample
