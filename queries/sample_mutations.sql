-- One mutation across every sample and run: the samples that carry it (PASS calls; ivar 1.3.1 semantics) with their allele fraction and depth, and each sample's share of the genome at >= 10x. Edit the position and alleles (here S:D614G, MN908947.3 23403 A>G).
SELECT
  v.run_id,
  v.sample,
  v.contig,
  v.pos,
  v.ref,
  v.alt,
  round(v.alt_fraction, 3) AS alt_fraction,
  v.depth,
  round(s.pct_genome_10x, 2) AS pct_genome_10x,
  s.committed_at
FROM variants v
JOIN sample_summary s ON s.run_id = v.run_id AND s.sample = v.sample
WHERE v.contig = 'MN908947.3' AND v.pos = 23403 AND v.ref = 'A' AND v.alt = 'G' AND v.pass
ORDER BY s.committed_at DESC, v.run_id, v.sample
