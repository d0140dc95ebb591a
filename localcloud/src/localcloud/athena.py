"""Athena, locally: DuckDB over the Parquet of the *registered* Glue partitions and the *committed*
snapshots of Iceberg tables only.

Each Glue table becomes a DuckDB view that reads exactly the files under its registered partitions'
locations, with the columns cast to the Glue types (as Athena reads by the catalog's schema, not the
file's) and the partition values added as columns. A run whose commit has not registered its
partitions is invisible, as on AWS. The SQL is Athena's dialect (Trino) translated by sqlglot;
``SET integer_division`` makes ``7 / 2`` equal 3 as in Trino. Unqualified table names resolve to the
app's database (:attr:`.contract.App.database`; the app's, seqlake's say, is its template's default Glue
database), so the app's named queries run unchanged here and on Athena.

An Iceberg table (Glue ``table_type`` ``ICEBERG``) is read as Athena reads it: its current snapshot from its
``metadata_location``, scanned by pyiceberg into Arrow (deletes applied, ``run_id`` projected from the
partition) and registered in DuckDB, with no DuckDB extension (this machine has no internet to fetch one).
The files are the state folder's mirror of the bucket (:class:`.iceberg.MirrorFileIO`). A query registers
only the tables it reads, directly or through its views (:func:`tables_read`): each Iceberg table is a scan,
and registering the whole catalog made every query cost ~1 s.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localcloud import contract

if TYPE_CHECKING:  # imported where used: `local run` and the deployer never query, and pay nothing for them
    import duckdb



def default_database() -> str:
    """The database of a query that names none: the app's (:attr:`.contract.App.database`)."""
    return contract.app().database


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
    #: an Iceberg table's current metadata file (Glue's ``metadata_location`` parameter); None for Hive tables
    metadata_location: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "name": self.name,
            "location": self.location,
            "columns": [list(c) for c in self.columns],
            "partition_keys": [list(k) for k in self.partition_keys],
            "partitions": [{"values": list(p.values), "location": p.location} for p in self.partitions],
            "view": self.view,
            "metadata_location": self.metadata_location,
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
            metadata_location=d.get("metadata_location"),
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


@functools.lru_cache(maxsize=512)
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


def _static_table(metadata_location: str, objects_root: Path) -> Any:
    from pyiceberg.table import StaticTable

    from localcloud.iceberg import MIRROR_FILE_IO, MirrorFileIO

    io_props = {"py-io-impl": MIRROR_FILE_IO, MirrorFileIO.ROOT: str(objects_root)}
    return StaticTable.from_metadata(metadata_location, properties=io_props)


def iceberg_arrow(metadata_location: str, objects_root: Path, as_of_ms: int | None = None) -> Any:
    """An Iceberg table's rows at its current snapshot, or as of ``as_of_ms`` (time travel: its newest
    snapshot committed then or before; none: no rows), as an Arrow table."""
    from localcloud.iceberg import no_threads_left

    with no_threads_left():  # the query's process may fork afterwards (a test's, the local cloud's)
        return _iceberg_arrow(metadata_location, objects_root, as_of_ms)


def _iceberg_arrow(metadata_location: str, objects_root: Path, as_of_ms: int | None) -> Any:
    table = _static_table(metadata_location, objects_root)
    if as_of_ms is None:
        return table.scan().to_arrow()
    then = [s for s in table.snapshots() if s.timestamp_ms <= as_of_ms]
    if not then:
        return table.schema().as_arrow().empty_table()
    return table.scan(snapshot_id=max(then, key=lambda s: s.timestamp_ms).snapshot_id).to_arrow()


def run_commit_ms(tables: Iterable[TableDef], objects_root: Path, run_id: str) -> int:
    """When ``run_id`` was committed: its newest append snapshot in any Iceberg table (``ValueError``: none)."""
    from localcloud import contract

    run_snapshot = contract.app().run_snapshot

    times: list[int] = []
    for t in tables:
        if t.metadata_location is None:
            continue
        table = _static_table(t.metadata_location, objects_root)
        snapshot_id = run_snapshot(table, run_id)
        snap = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        if snap is not None:
            times.append(int(snap.timestamp_ms))
    if not times:
        raise ValueError(f"no table holds a commit of run {run_id!r} (the state folder's run history lists them)")
    return max(times)


def iceberg_view_sql(table: TableDef, relation: str) -> str:
    """``SELECT`` over a registered Arrow relation, typed by the catalog as :func:`view_sql` types Hive's."""
    cols = [f"CAST({_quote(n)} AS {duckdb_type(t)}) AS {_quote(n)}" for n, t in table.columns]
    return f"SELECT {', '.join(cols)} FROM {_quote(relation)}"  # noqa: S608 - catalog names, quoted


def connect(
    tables: Iterable[TableDef], files_under: FilesUnder, database: str | None = None, *,
    objects_root: Path | None = None, as_of_run: str | None = None, reads: Sequence[TableDef] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one schema per Glue database and one view per table of ``reads`` (default:
    every table; an Iceberg table's rows read from ``objects_root``, the mirror of the bucket; with
    ``as_of_run``, as they were when that run committed: Athena's ``FOR VERSION AS OF`` the run's snapshot,
    applied to every Iceberg table)."""
    import duckdb

    default_database = database or contract.app().database
    con = duckdb.connect()
    con.execute("SET integer_division = true")
    con.execute("SET TimeZone = 'UTC'")
    tables = list(tables)
    as_of_ms = None
    if as_of_run is not None:
        if objects_root is None:
            raise ValueError("time travel reads the Iceberg tables: no local copy of the bucket to read")
        as_of_ms = run_commit_ms(tables, objects_root, as_of_run)
    for db in sorted({default_database} | {t.database for t in tables}):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(db)}")
    tables = tables if reads is None else list(reads)
    for t in tables:
        if t.view is None and t.metadata_location is not None:
            if objects_root is None:
                raise ValueError(f"{t.database}.{t.name} is an Iceberg table: no local copy of the bucket to read")
            relation = f"__iceberg__{t.database}__{t.name}"
            con.register(relation, iceberg_arrow(t.metadata_location, objects_root, as_of_ms))
            name = f"{_quote(t.database)}.{_quote(t.name)}"
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {iceberg_view_sql(t, relation)}")
        elif t.view is None:
            con.execute(f"CREATE OR REPLACE VIEW {_quote(t.database)}.{_quote(t.name)} AS {view_sql(t, files_under)}")
    # Athena's views after the tables they read, each resolved in its own database as Athena resolves it
    for t in tables:
        if t.view is not None:
            con.execute(f"USE {_quote(t.database)}")
            con.execute(f"CREATE OR REPLACE VIEW {_quote(t.database)}.{_quote(t.name)} AS {translate(t.view)}")
    con.execute(f"USE {_quote(default_database)}")
    return con


@functools.lru_cache(maxsize=256)
def translate(sql: str) -> str:
    """Athena (Trino) SQL -> DuckDB SQL. Raises ``ValueError`` with the parser's message."""
    return str(_parse(sql).sql("duckdb"))


@functools.lru_cache(maxsize=256)
def _view_reads(sql: str) -> frozenset[tuple[str | None, str]]:
    return frozenset(_names_read(_parse(sql)))


def _names_read(statement: Any) -> set[tuple[str | None, str]]:
    """(database or None, name) of every table name in ``statement`` (CTE names among them: harmless)."""
    from sqlglot import exp

    return {(node.db or None, node.name) for node in statement.find_all(exp.Table)}


def tables_read(statement: Any, tables: Sequence[TableDef], default_database: str) -> list[TableDef]:
    """The catalog's tables ``statement`` reads, directly or through the views it reads (a view's unqualified
    names resolve in its own database): a query registers those alone, not every table of the catalog."""
    by_name = {(t.database, t.name): t for t in tables}
    wanted: dict[tuple[str, str], TableDef] = {}
    todo = [(db or default_database, name) for db, name in _names_read(statement)]
    while todo:
        key = todo.pop()
        table = by_name.get(key)
        if table is None or key in wanted:
            continue
        wanted[key] = table
        if table.view is not None:
            todo += [(db or table.database, name) for db, name in _view_reads(table.view)]
    return [t for t in tables if (t.database, t.name) in wanted]


def _parse(sql: str) -> Any:
    """The one statement of an Athena (Trino) query, parsed by sqlglot (``ValueError``: none, several, or bad)."""
    import sqlglot

    try:
        statements = [s for s in sqlglot.parse(sql, read="trino") if s is not None]
    except sqlglot.errors.ParseError as err:
        raise ValueError(f"cannot parse the query: {err}") from None
    if len(statements) != 1:
        raise ValueError(f"expected one SQL statement, got {len(statements)}")
    return statements[0]


#: Athena's metadata table of an Iceberg table's snapshots: ``"<table>$snapshots"``
SNAPSHOTS_SUFFIX = "$snapshots"


@dataclass(frozen=True)
class IcebergRelation:
    """A relation a query names beyond the catalog's tables: an Iceberg table as of a snapshot (Athena's
    ``FOR VERSION AS OF <snapshot id>``), or its snapshots (``"<table>$snapshots"``)."""

    table: TableDef
    #: the snapshot read; None: the table's snapshots themselves
    snapshot_id: int | None

    @property
    def name(self) -> str:
        what = "snapshots" if self.snapshot_id is None else f"v{self.snapshot_id}"
        return f"__iceberg__{self.table.database}__{self.table.name}__{what}"


def iceberg_relations(statement: Any, tables: Sequence[TableDef], default_database: str) -> list[IcebergRelation]:
    """Rewrite ``statement`` (sqlglot, Trino) in place so that each ``t FOR VERSION AS OF n`` and each
    ``"t$snapshots"`` names a relation :func:`register_relations` makes; returns those relations."""
    from sqlglot import exp

    by_name = {(t.database, t.name): t for t in tables if t.metadata_location is not None}
    out: dict[str, IcebergRelation] = {}
    for node in list(statement.find_all(exp.Table)):
        version, name = node.args.get("version"), node.name
        database = node.db or default_database
        if version is None and not name.endswith(SNAPSHOTS_SUFFIX):
            continue
        base = name.removesuffix(SNAPSHOTS_SUFFIX) if version is None else name
        table = by_name.get((database, base))
        if table is None:
            raise ValueError(f"{database}.{base} is not an Iceberg table: no snapshots to read")
        if version is None:
            relation = IcebergRelation(table, None)
        else:
            if str(version.this).upper() != "VERSION" or not isinstance(version.expression, exp.Literal) \
                    or version.expression.is_string:
                raise ValueError(f"{database}.{base}: only FOR VERSION AS OF <snapshot id> is read locally")
            relation = IcebergRelation(table, int(version.expression.this))
        out[relation.name] = relation
        alias = node.alias or name  # columns qualified by the table's own name still resolve
        node.replace(exp.Table(this=exp.to_identifier(relation.name, quoted=True),
                               db=exp.to_identifier(database, quoted=True),
                               alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
    return list(out.values())


def register_relations(con: duckdb.DuckDBPyConnection, relations: Iterable[IcebergRelation],
                       objects_root: Path) -> None:
    """Each relation as a view in its table's database (a snapshot typed by the catalog, as the table)."""
    from localcloud.iceberg import no_threads_left

    for r in relations:
        with no_threads_left():
            table = _static_table(str(r.table.metadata_location), objects_root)
            if r.snapshot_id is None:
                arrow = table.inspect.snapshots()
            elif table.snapshot_by_id(r.snapshot_id) is None:
                listing = f'"{r.table.name}{SNAPSHOTS_SUFFIX}"'
                raise ValueError(f"{r.table.database}.{r.table.name} has no snapshot {r.snapshot_id} "
                                 f"(its snapshots are in {listing})")
            else:
                arrow = table.scan(snapshot_id=r.snapshot_id).to_arrow()
        raw = f"{r.name}__arrow"
        con.register(raw, arrow)
        select = (f"SELECT * FROM {_quote(raw)}" if r.snapshot_id is None  # noqa: S608 - names of ours, quoted
                  else iceberg_view_sql(r.table, raw))
        con.execute(f"CREATE OR REPLACE VIEW {_quote(r.table.database)}.{_quote(r.name)} AS {select}")


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
    tables: Sequence[TableDef], files_under: FilesUnder, sql: str, database: str | None = None, *,
    objects_root: Path | None = None, as_of_run: str | None = None,
) -> Result:
    """Run one Athena query; ``ValueError`` for a query that cannot be parsed or run. Iceberg's time travel
    (``FOR VERSION AS OF <snapshot id>``) and metadata table ``"<table>$snapshots"`` are read as Athena reads
    them."""
    import duckdb

    default_database = database or contract.app().database
    statement = _parse(sql)
    relations = iceberg_relations(statement, tables, default_database)
    duck_sql = statement.sql("duckdb")
    con = connect(tables, files_under, default_database, objects_root=objects_root, as_of_run=as_of_run,
                  reads=tables_read(statement, tables, default_database))
    try:
        if relations:
            if objects_root is None:
                raise ValueError("time travel reads the Iceberg tables: no local copy of the bucket to read")
            register_relations(con, relations, objects_root)
        cur = con.execute(duck_sql)
        columns = [d[0] for d in cur.description or []]
        return Result(columns, [tuple(r) for r in cur.fetchall()])
    except duckdb.Error as err:
        raise ValueError(str(err).splitlines()[0]) from None
    finally:
        con.close()
