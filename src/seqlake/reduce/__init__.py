"""The reduce step: one Batch array job, a reducer per region and sample group (docs/INTERNALS.md).

- :mod:`.main` the entry point (``seqlake reduce``): the array index is the reducer
- :mod:`.reducer` one reducer: every child's part of its region read by ranged GETs, merged window by window
  into the per-position results, depth and coverage, and a summary the commit checks
- :mod:`.record_counts` a window's alleles and indels counted from the children's sorted BAM records
- :mod:`.calls` one sample's variants, consensus and amplicon depth in one region
- :mod:`.bams` each sample's BAM: the reducers' pieces and the commit's join with its index

May import: :mod:`seqlake.base`, :mod:`seqlake.formats`, :mod:`seqlake.reads`, :mod:`seqlake.plan`,
:mod:`seqlake.lake`. Must not import the child (a sibling stage), the commit (which imports this), the report,
the AWS steps or the local cloud.
"""
