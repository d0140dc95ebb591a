-- Mutations across samples and runs (PASS calls, ivar 1.3.1 semantics), in samples with >= 90 % of the genome at >= 10x: one row per run, sample and mutation, a mutation's samples together, with what it does to each protein (runs with a GFF). Add e.g. AND v.pos = 23403 AND v.alt = 'G' for one mutation by nucleotide, or AND contains(split(v.aa_change, ','), 'S:D614G') by amino-acid change (a codon changed by two SNVs: each SNV's own change, as ivar).
SELECT
  v.run_id,
  v.sample,
  v.contig,
  v.pos,
  v.ref,
  v.alt,
  v.type,
  v.aa_change,
  round(v.alt_fraction, 3) AS alt_fraction,
  v.depth,
  round(s.pct_genome_10x, 2) AS pct_genome_10x,
  s.committed_at
FROM variants v
JOIN sample_summary s ON s.run_id = v.run_id AND s.sample = v.sample
WHERE v.pass AND s.pct_genome_10x >= 90
ORDER BY v.contig, v.pos, v.ref, v.alt, s.committed_at, v.run_id, v.sample
