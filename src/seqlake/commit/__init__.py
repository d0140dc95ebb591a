"""The commit step (a Lambda, or the last step of ``seqlake process``): :mod:`.merge` checks every child's
manifest and every reducer's summary, adds their aggregates up, writes the small tables and joins each sample's
files (consensus, VCF, BAM) from the reducers' pieces by server-side copies.

May import: :mod:`seqlake.base`, :mod:`seqlake.formats`, :mod:`seqlake.reads`, :mod:`seqlake.plan`,
:mod:`seqlake.lake`, :mod:`seqlake.reduce` (the reducers' summaries and pieces). Must not import the child, the
report, the AWS steps or the local cloud.
"""
