"""The naming rules ``tables.py`` documents (its ``PERCENTAGES`` note, in docs/TABLES.md), enforced on every
column of every table: a name says its unit, and one name means one thing in every table."""

from __future__ import annotations

import re
from collections import defaultdict

import pyarrow as pa
import pytest

from seqlake.lake.tables import PERCENTAGES, STAGING_TABLES, TABLES, Column, Table

ALL = (*TABLES, *STAGING_TABLES)
#: what a depth column's description says about which depth it is
DEPTH_KINDS = {"samtools depth": "aligned bases (samtools depth -a)", "span": "whole alignment spans",
               "mpileup depth": "bases and deletions (samtools mpileup)"}
#: phrasings that leave a reader guessing whether reads or pairs are counted
AMBIGUOUS_COUNT = re.compile(r"reads \(pairs\)|pairs \(reads\)|\breads or pairs\b|\bpairs or reads\b")


def columns() -> list[tuple[Table, Column]]:
    return [(t, c) for t in ALL for c in t.columns]


def depth_kind(column: Column) -> str | None:
    found = {kind for phrase, kind in DEPTH_KINDS.items() if phrase in column.doc}
    return found.pop() if len(found) == 1 else None


def naming_problems(tables: tuple[Table, ...]) -> list[str]:
    """Every way a column of ``tables`` breaks the rules (empty: none)."""
    found = []
    for t, c in [(table, c) for table in tables for c in table.columns]:
        where = f"{t.name}.{c.name}"
        percent, fraction = c.name.startswith("pct_"), c.name.endswith("_fraction")
        if percent != c.doc.startswith("percentage"):
            found.append(f"{where}: a percentage is named pct_* and described as one")
        if fraction != c.doc.startswith("fraction"):
            found.append(f"{where}: a fraction is named *_fraction and described as one")
        if (percent or fraction) and c.type != pa.float64():
            found.append(f"{where}: a percentage or fraction is a double")
        if not (percent or fraction) and re.search(r"(^|_)(rate|ratio|percent|frac)(_|$)", c.name):
            found.append(f"{where}: a rate or ratio is named pct_* (0-100) or *_fraction (0-1)")
        if AMBIGUOUS_COUNT.search(c.doc):
            found.append(f"{where}: say whether reads or pairs are counted")
        if "pairs" in c.name and "pairs" not in c.doc:
            found.append(f"{where}: a name with pairs counts pairs")
        if "depth" in c.name and c.type == pa.float64() and depth_kind(c) is None:
            found.append(f"{where}: say which depth (samtools depth's aligned bases, or whole spans)")
    by_name: dict[str, list[tuple[Table, Column]]] = defaultdict(list)
    for t, c in [(table, c) for table in tables for c in table.columns]:
        by_name[c.name].append((t, c))
    for name, uses in sorted(by_name.items()):
        # a staging table's dictionary-encoded strings are strings (the encoding is storage, not meaning)
        if len({c.type.value_type if pa.types.is_dictionary(c.type) else c.type for _, c in uses}) > 1:
            found.append(f"{name}: one name, several types ({', '.join(t.name for t, _ in uses)})")
        kinds = {depth_kind(c) for _, c in uses if "depth" in c.name}
        if len(kinds) > 1:
            found.append(f"{name}: one name, several depths ({', '.join(t.name for t, _ in uses)})")
    return found


def test_every_column_follows_the_naming_rules() -> None:
    assert naming_problems(ALL) == []


def test_the_rules_are_the_ones_the_tables_document() -> None:
    for promise in ("`pct_*`", "0 to 100", "`*_fraction`", "`reads`", "`pairs`", "`mean_depth`", "`mean_span_depth`"):
        assert promise in PERCENTAGES


@pytest.mark.parametrize(("column", "problem"), [
    (Column("error_rate", pa.float64(), "mismatches / bases mapped"), "rate or ratio"),
    (Column("pct_q30", pa.float64(), "share of bases with Q >= 30"), "a percentage is named pct_*"),
    (Column("mapped_fraction", pa.float64(), "percentage of reads mapped"), "a fraction is named"),
    (Column("pct_gc", pa.int64(), "percentage of G and C"), "is a double"),
    (Column("reads_too_short", pa.int64(), "reads (pairs) removed by the length filter"), "reads or pairs"),
    (Column("read_pairs", pa.int64(), "reads of both mates"), "a name with pairs counts pairs"),
    (Column("mean_depth", pa.float64(), "mean depth over the reference"), "say which depth"),
])
def test_each_rule_catches_its_break(column: Column, problem: str) -> None:
    table = Table("t", "a table", (column,))
    assert any(problem in p for p in naming_problems((table,)))


def test_one_name_has_one_meaning_across_tables() -> None:
    exact = Column("mean_depth", pa.float64(), "mean depth (`samtools depth -a`)")
    spans = Column("mean_depth", pa.float64(), "mean depth of whole alignment spans (deletions count)")
    found = naming_problems((Table("a", "", (exact,)), Table("b", "", (spans,))))
    assert found == ["mean_depth: one name, several depths (a, b)"]
    typed = naming_problems((Table("a", "", (Column("reads", pa.int64(), "reads"),)),
                             Table("b", "", (Column("reads", pa.float64(), "reads"),))))
    assert typed == ["reads: one name, several types (a, b)"]
