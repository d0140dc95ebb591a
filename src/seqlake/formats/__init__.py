"""File formats seqlake writes and reads besides FASTQ: one home for each (docs/INTERNALS.md, "Read slices
and the per-sample BAM").

- :mod:`.bgzf` BGZF blocks (SAM specification 4.1): compression at record boundaries, virtual offsets
- :mod:`.cigar` CIGAR strings and BAM's packed operations, vectorised
- :mod:`.bam` BAM records encoded and decoded over whole batches with NumPy, the header, the sort key
- :mod:`.binindex` the UCSC binning scheme and linear index that ``.bai`` and ``.tbi`` share, in pieces
- :mod:`.bai` the ``.bai`` of BAM records from their virtual offsets
- :mod:`.cram` CRAM 3.0's framing (file definition, header and EOF containers) and the ``.crai``, no encoder

May import: nothing of seqlake (layer 0: pure formats over bytes and arrays, so every stage may use them).
"""
