"""Samplesheets (the nf-core ``sample,fastq_1,fastq_2`` convention); names of files are :mod:`seqlake.base.naming`'s.

A sheet is a CSV with a header row naming at least ``sample`` and ``fastq_1`` (``fastq_2`` optional, empty
for single-end rows). Paths are relative to the sheet's own location (local folder or S3 prefix), absolute
``s3://`` URIs (on AWS in the sheet's bucket or ``AllowedInputBuckets``), or, in a local sheet, absolute
local paths. Each row is checked against ``schemas/samplesheet.schema.json`` (the same rules
as nf-core's ``assets/schema_input.json``: sample names without spaces, FASTQ file names) and then for
what a schema cannot say: a sample mixing paired and single-end rows, a file listed twice, ``..`` in
paths, URIs in another bucket (unless allowed). Every error names the sheet, the line and the problem.

Several rows of one sample are its lanes (as nf-core pipelines read them): one sample, its files
read one after the other. Other columns are kept per row (:mod:`seqlake.base.metadata`: ``control``,
``run_name`` and ``lane`` are typed and checked).
"""

from __future__ import annotations

import csv
import io
import posixpath
import re
from collections.abc import Collection
from dataclasses import dataclass

from seqlake import schemas
from seqlake.base import storage
from seqlake.base.errors import BadInputError
from seqlake.base.metadata import check_row
from seqlake.base.model import Sample

REQUIRED_COLUMNS = ("sample", "fastq_1")

@dataclass(frozen=True)
class SheetRow:
    line: int
    sample: str
    fastq_1: str
    fastq_2: str | None


#: ``allow_other_buckets`` of :func:`parse_samplesheet`: True (any bucket), False (the sheet's own), or the
#: buckets allowed besides the sheet's own (the stack parameter ``AllowedInputBuckets``)
OtherBuckets = bool | Collection[str]


def _check_bucket(sheet_uri: str, path: str, line: int, allow: OtherBuckets) -> None:
    """An ``s3://`` path of an S3 sheet must be in the sheet's bucket or an allowed one."""
    if allow is True or not storage.is_s3(sheet_uri):
        return
    own, _ = storage.split_s3(sheet_uri)
    other, _ = storage.split_s3(path)
    if other == own:
        return
    if not allow:
        raise BadInputError(sheet_uri, f"{path!r} is in bucket {other!r}, not the sheet's bucket {own!r} "
                            "(other buckets are not allowed)", line=line)
    if other not in allow:
        raise BadInputError(sheet_uri, f"{path!r} is in bucket {other!r}, which is not in AllowedInputBuckets "
                            f"({', '.join(sorted(allow))})", line=line)


def _resolve(sheet_uri: str, path: str, line: int, allow_other_buckets: OtherBuckets) -> str:
    if path.startswith("s3://"):
        if ".." in path.split("/"):
            raise BadInputError(sheet_uri, f"path {path!r} contains '..'", line=line)
        _check_bucket(sheet_uri, path, line, allow_other_buckets)
        return path
    if "://" in path:
        raise BadInputError(sheet_uri, f"unsupported URI {path!r} (use a relative path or s3://)", line=line)
    if ".." in re.split(r"[\\/]", path):
        raise BadInputError(sheet_uri, f"path {path!r} must be without '..'", line=line)
    if path.startswith("/"):
        # an absolute path (nf-core sheets often have them) names a local file: fine for a local sheet
        # (seqlake process, local run), meaningless for a sheet in S3
        if storage.is_s3(sheet_uri):
            raise BadInputError(sheet_uri, f"path {path!r} is a local absolute path in a sheet in S3: use a key "
                                "relative to the sheet or an s3:// URI", line=line)
        return path
    if storage.is_s3(sheet_uri):
        return posixpath.join(sheet_uri.rsplit("/", 1)[0], path)
    return storage.join(str(storage.local_parent(sheet_uri)), path)


def parse_samplesheet(text: str, sheet_uri: str, *,
                      allow_other_buckets: OtherBuckets = False) -> list[Sample]:
    """Validate a samplesheet's text and return its samples with resolved URIs.

    ``allow_other_buckets``: whether ``s3://`` paths of a sheet in S3 may name another bucket than the
    sheet's: True (any), False (none), or which ones.
    """
    import jsonschema

    rows = [r for _, r in _csv_rows(text, sheet_uri)]
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise BadInputError(sheet_uri, "the samplesheet is empty", line=1)
    header = [c.strip() for c in rows[0]]
    for col in REQUIRED_COLUMNS:
        if col not in header:
            raise BadInputError(sheet_uri, f"missing column {col!r} (header: {','.join(header)})", line=1)
    if len(set(header)) != len(header):
        raise BadInputError(sheet_uri, f"duplicate column names in header {header}", line=1)
    validator = jsonschema.Draft202012Validator(schemas.load("samplesheet"))
    fast = schemas.fast_check("samplesheet")
    seen: dict[str, tuple[int, bool]] = {}
    files: dict[str, int] = {}
    out: list[Sample] = []
    line = 1
    for line, raw in _numbered(text, sheet_uri):
        if len(raw) != len(header):
            raise BadInputError(sheet_uri, f"{len(raw)} fields but the header has {len(header)}", line=line)
        row = {k: v.strip() for k, v in zip(header, raw, strict=True)}
        doc = {k: row.get(k, "") for k in ("sample", "fastq_1", "fastq_2")}
        for err in [] if fast(doc) else sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            col = "/".join(str(p) for p in err.absolute_path) or "row"
            custom = schemas.load("samplesheet")["properties"].get(col, {}).get("errorMessage")
            raise BadInputError(sheet_uri, f"column {col}: {custom or err.message} (got {doc.get(col)!r})",
                                line=line)
        sample = doc["sample"]
        extra = _lane_metadata(sheet_uri, row, line, seen)
        r1 = _resolve(sheet_uri, doc["fastq_1"], line, allow_other_buckets)
        r2 = _resolve(sheet_uri, doc["fastq_2"], line, allow_other_buckets) if doc["fastq_2"] else None
        if r2 is not None and r2 == r1:
            raise BadInputError(sheet_uri, "fastq_1 and fastq_2 are the same file", line=line)
        for uri in (r1, r2):
            if uri is not None and files.setdefault(uri, line) != line:
                raise BadInputError(sheet_uri, f"{uri} is already listed on line {files[uri]}", line=line)
        out.append(Sample(sample, r1, r2, extra))
    if not out:
        raise BadInputError(sheet_uri, "the samplesheet has a header but no samples", line=line + 1)
    return out


def _lane_metadata(sheet_uri: str, row: dict[str, str], line: int, seen: dict[str, tuple[int, bool]]
                   ) -> dict[str, str]:
    """The row's other columns, checked; rows of one sample (lanes) must agree on paired-end."""
    sample, paired_row = row["sample"], bool(row.get("fastq_2"))
    first, paired = seen.setdefault(sample, (line, paired_row))
    if paired != paired_row:
        raise BadInputError(sheet_uri, f"sample {sample!r} mixes paired-end and single-end rows (first on "
                            f"line {first})", line=line)
    extra = {k: v for k, v in row.items() if k not in ("sample", "fastq_1", "fastq_2")}
    try:
        check_row(extra)
    except ValueError as err:
        raise BadInputError(sheet_uri, str(err), line=line) from None
    return extra


def _numbered(text: str, sheet_uri: str) -> list[tuple[int, list[str]]]:
    """Data rows with their 1-based physical line numbers (blank lines skipped)."""
    out = []
    first = True
    for line, raw in _csv_rows(text, sheet_uri):
        if not any(c.strip() for c in raw):
            continue
        if first:
            first = False
            continue
        out.append((line, raw))
    return out


def _csv_rows(text: str, sheet_uri: str) -> list[tuple[int, list[str]]]:
    """Every CSV row with the physical line it ends on; what the csv module cannot read (a NUL byte, a
    field over its size limit, a quote left open) is a BadInputError naming the line."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    rows = []
    try:
        for raw in reader:
            rows.append((reader.line_num, raw))
    except csv.Error as err:
        raise BadInputError(sheet_uri, f"not a readable CSV row: {err}", line=max(1, reader.line_num)) from None
    return rows


def read_samplesheet(uri: str, *, allow_other_buckets: OtherBuckets = False) -> list[Sample]:
    data = storage.read_bytes(uri)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInputError(uri, f"not UTF-8 text: byte {err.start} (0x{data[err.start]:02x}) {err.reason}",
                            line=data[:err.start].count(b"\n") + 1) from err
    return parse_samplesheet(text, uri, allow_other_buckets=allow_other_buckets)
