"""Athena, locally: DuckDB over the Parquet of the *registered* Glue partitions only.

Each Glue table becomes a DuckDB view that reads exactly the files under its registered partitions'
locations, with the columns cast to the Glue types (as Athena reads by the catalog's schema, not the
file's) and the partition values added as columns. A run whose commit has not registered its
partitions is invisible, as on AWS. The SQL is Athena's dialect (Trino) translated by sqlglot;
``SET integer_division`` makes ``7 / 2`` equal 3 as in Trino. Unqualified table names resolve to the
database ``seqlake`` (the template's default Glue database), so the named queries in ``queries/`` run
unchanged here and on Athena.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: `local run` and the deployer never query, and pay nothing for them
    import duckdb

DEFAULT_DATABASE = "seqlake"


@dataclass(frozen=True)
class Partition:
    values: tuple[str, ...]
    location: str


@dataclass(frozen=True)
class TableDef:
    """What Glue knows about a table: enough to answer queries over it."""

    database: str
    name: str
    location: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...] = ()
    partitions: tuple[Partition, ...] = field(default=())
    #: an Athena view's query (Athena's dialect), decoded from the Glue table's ``ViewOriginalText``
    view: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "name": self.name,
            "location": self.location,
            "columns": [list(c) for c in self.columns],
            "partition_keys": [list(k) for k in self.partition_keys],
            "partitions": [{"values": list(p.values), "location": p.location} for p in self.partitions],
            "view": self.view,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableDef:
        return cls(
            database=d["database"],
            name=d["name"],
            location=d["location"],
            columns=tuple((c[0], c[1]) for c in d["columns"]),
            partition_keys=tuple((k[0], k[1]) for k in d["partition_keys"]),
            partitions=tuple(Partition(tuple(p["values"]), p["location"]) for p in d["partitions"]),
            view=d.get("view"),
        )


_PRESTO_VIEW = re.compile(r"\A/\* Presto View: ([A-Za-z0-9+/=]+) \*/\Z")


def view_query(view_original_text: str) -> str:
    """The query of an Athena view from its Glue ``ViewOriginalText`` (``/* Presto View: <base64 JSON> */``,
    as Athena writes a ``CREATE VIEW``); ``ValueError`` for anything else."""
    m = _PRESTO_VIEW.match(view_original_text.strip())
    if m is None:
        raise ValueError(f"not an Athena view definition: {view_original_text[:60]!r}")
    return str(json.loads(base64.b64decode(m.group(1)))["originalSql"])


#: maps a Glue location (``s3://bucket/prefix/``) to the Parquet files stored under it locally
FilesUnder = Callable[[str], list[Path]]


def duckdb_type(glue_type: str) -> str:
    """The DuckDB spelling of a Hive / Glue column type (``bigint``, ``array<string>``, ...)."""
    from sqlglot import exp

    return exp.DataType.build(glue_type, dialect="hive").sql("duckdb")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def view_sql(table: TableDef, files_under: FilesUnder) -> str:
    """``SELECT`` over the table's registered partitions, typed by the catalog."""
    cols = [f"CAST({_quote(n)} AS {duckdb_type(t)}) AS {_quote(n)}" for n, t in table.columns]
    selects: list[str] = []
    for part in table.partitions:
        files = sorted(str(p) for p in files_under(part.location))
        if not files:
            continue
        keys = [
            f"CAST({_literal(v)} AS {duckdb_type(t)}) AS {_quote(n)}"
            for (n, t), v in zip(table.partition_keys, part.values, strict=True)
        ]
        file_list = "[" + ", ".join(_literal(f) for f in files) + "]"
        selects.append(
            # identifiers and literals come from the catalog and are quoted: no user SQL is spliced in
            f"SELECT {', '.join(cols + keys)} FROM read_parquet({file_list}, union_by_name = true)"  # noqa: S608
        )
    if not selects:
        empty = [f"CAST(NULL AS {duckdb_type(t)}) AS {_quote(n)}" for n, t in table.columns + table.partition_keys]
        return f"SELECT {', '.join(empty)} WHERE false"
    return "\nUNION ALL BY NAME\n".join(selects)


def connect(
    tables: Iterable[TableDef], files_under: FilesUnder, default_database: str = DEFAULT_DATABASE
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one schema per Glue database and one view per table."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET integer_division = true")
    con.execute("SET TimeZone = 'UTC'")
    tables = list(tables)
    for db in sorted({default_database} | {t.database for t in tables}):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(db)}")
    for t in tables:
        if t.view is None:
            con.execute(f"CREATE OR REPLACE VIEW {_quote(t.database)}.{_quote(t.name)} AS {view_sql(t, files_under)}")
    # Athena's views after the tables they read, each resolved in its own database as Athena resolves it
    for t in tables:
        if t.view is not None:
            con.execute(f"USE {_quote(t.database)}")
            con.execute(f"CREATE OR REPLACE VIEW {_quote(t.database)}.{_quote(t.name)} AS {translate(t.view)}")
    con.execute(f"USE {_quote(default_database)}")
    return con


def translate(sql: str) -> str:
    """Athena (Trino) SQL -> DuckDB SQL. Raises ``ValueError`` with the parser's message."""
    import sqlglot

    try:
        statements = sqlglot.transpile(sql, read="trino", write="duckdb")
    except sqlglot.errors.ParseError as err:
        raise ValueError(f"cannot parse the query: {err}") from None
    if len(statements) != 1:
        raise ValueError(f"expected one SQL statement, got {len(statements)}")
    return statements[0]


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[tuple[Any, ...]]

    def as_text(self) -> list[list[str | None]]:
        """Cells as Athena's ``GetQueryResults`` spells them (``VarCharValue``; NULL has none)."""
        return [[None if v is None else text(v) for v in row] for row in self.rows]


def text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, float | decimal.Decimal):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return str(value)


def query(
    tables: Sequence[TableDef], files_under: FilesUnder, sql: str, default_database: str = DEFAULT_DATABASE
) -> Result:
    """Run one Athena query; ``ValueError`` for a query that cannot be parsed or run."""
    import duckdb

    duck_sql = translate(sql)
    con = connect(tables, files_under, default_database)
    try:
        cur = con.execute(duck_sql)
        columns = [d[0] for d in cur.description or []]
        return Result(columns, [tuple(r) for r in cur.fetchall()])
    except duckdb.Error as err:
        raise ValueError(str(err).splitlines()[0]) from None
    finally:
        con.close()
