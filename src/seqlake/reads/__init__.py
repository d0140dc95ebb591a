"""Reading FASTQ: formats and random access, the bytes a user hands over.

- :mod:`.fastq` record-aligned chunks of plain and gzip files, truncation found and named
- :mod:`.chunks` the vectorised parser and validator of a chunk's records (every field's offsets)
- :mod:`.gzindex` the planning pass over a gzip stream: record counts and a seek index of checkpoints
- :mod:`.bgzf` the same for BGZF, whose blocks are independent; :mod:`.seekindex` the seek index's file

May import: :mod:`seqlake.base`. Must not import the plan, the lake or the child: they read through this.
"""
