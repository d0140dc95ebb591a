"""The shared vocabulary every stage speaks: the lowest layer.

- :mod:`.model` run states, samples, the run's identity; :mod:`.errors` the error types and exit codes;
  :mod:`.params` the run parameters; :mod:`.limits` AWS's limits the app is held to
- :mod:`.storage` local paths and ``s3://`` URIs alike; :mod:`.clients` the boto3 clients, made on first use
- :mod:`.layout` the bucket layout (every key of a run: inputs, plan, staging, results, reports):
  here rather than in ``lake/`` because the plan and the child name keys too
- :mod:`.naming` sample names from file names, run ids; :mod:`.metadata` samplesheet and Illumina header
  fields; :mod:`.cpus` a process's vCPUs; :mod:`.cost` the dollar model; :mod:`.faults` test-only fault hooks;
  :mod:`.cachedir` the user's cache folder and the reference cache

May import: its own modules only. Must not import
any stage (``reads``, ``plan``, ``lake``, ``child``...). Only :mod:`.storage` and :mod:`.clients` import boto3.
"""
