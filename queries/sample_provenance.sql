-- Where each sample came from: sequencing run, flowcell, lanes, instrument, and which samples are controls.
SELECT
  run_id,
  sample,
  control,
  run_name,
  flowcell,
  lanes,
  instrument
FROM sample_summary
ORDER BY run_id, control DESC, sample
