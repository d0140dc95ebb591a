"""The plan: how a run's inputs are cut into shards and packed into children, and what a child reads of it.

- :mod:`.planner` reads the inputs (record counts, seek points) and makes the plan
- :mod:`.planfile` the plan's types and its file (``plan.json`` and its binary slices); :mod:`.planslices` and
  :mod:`.fixedwidth` the fixed-width tables a child reads with one ranged GET
- :mod:`.childplan` one child's view of the plan; :mod:`.shards` a child's reading of its spans (here, not in
  ``child/``, because it is the plan's record-boundary rule applied: it imports the planner and the readers only)
- :mod:`.samplesheet` the lab's samplesheet, checked
- :mod:`.reference` the run's reference pinned by its content, its minimap2 index built once before the fan-out
  (a child only loads it)

May import: :mod:`seqlake.base`, :mod:`seqlake.schemas`, :mod:`seqlake.reads`. Must not import the lake or the child.
"""
