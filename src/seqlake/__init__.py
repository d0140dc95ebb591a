"""seqlake: FASTQ in S3 -> QC, trimming, alignment and coverage as a queryable Parquet data lake."""

__version__ = "0.1.0"
