-- Each sample's current consensus genome, from its latest run (ivar consensus semantics): length, N and ambiguous bases, share of the genome called, with the PASS variants and the genome at >= 10x beside them.
SELECT
  c.run_id,
  c.sample,
  c.contig,
  c.length,
  c.n_bases,
  c.ambiguous_bases,
  round(c.pct_called, 2) AS pct_called,
  round(s.pct_genome_10x, 2) AS pct_genome_10x,
  (SELECT count(*) FROM variants v
   WHERE v.run_id = c.run_id AND v.sample = c.sample AND v.contig = c.contig AND v.pass) AS pass_variants,
  c.fasta_uri
FROM consensus_latest c
JOIN sample_summary_latest s ON s.run_id = c.run_id AND s.sample = c.sample
ORDER BY c.run_id, c.sample, c.contig
