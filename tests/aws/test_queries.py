"""queries/*.sql are Athena (Trino) SQL that also run locally: sqlglot transpiles them to DuckDB, which
runs them over Parquet files written with the schemas of seqlake.lake.tables (one small row per table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

from seqlake.aws import render_template
from seqlake.lake.tables import TABLES

from .conftest import REPO

QUERIES = sorted((REPO / "queries").glob("*.sql"))


def sample_value(field: pa.Field, i: int) -> Any:
    t = field.type
    if pa.types.is_string(t):
        return {"stage": "trimmed", "state": "SUCCEEDED", "strand": "+"}.get(field.name, f"{field.name}{i}")
    if pa.types.is_boolean(t):
        return True
    if pa.types.is_timestamp(t):
        return pa.scalar(1_795_797_010_000 + i, type=t).as_py()
    if pa.types.is_floating(t):
        return {"pct_genome_10x": 95.0}.get(field.name, 1.5 + i)
    return {"bin_end": 100, "bin_start": 0, "mean_span_depth": 3, "threshold": 10}.get(field.name, 5 + i)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    root: Path = tmp_path_factory.mktemp("results")
    con = duckdb.connect()
    for table in TABLES:
        part = root / table.name / "run_id=r1"
        part.mkdir(parents=True)
        rows = {f.name: [sample_value(f, i) for i in range(2)] for f in table.schema}
        pq.write_table(pa.table(rows, schema=table.schema), part / "part-0.parquet")
        con.execute(
            f"CREATE VIEW {table.name} AS SELECT * FROM read_parquet('{root / table.name}/**/*.parquet', "
            "hive_partitioning = true, hive_types = {'run_id': VARCHAR})"
        )
    # the generated <table>_latest views, which named queries read (the hand-written ones are tested below)
    for view in VIEWS:
        if view.name.endswith("_latest"):
            [duck] = sqlglot.transpile(view.sql, read="trino", write="duckdb")
            con.execute(f"CREATE VIEW {view.name} AS {duck}")
    return con


@pytest.mark.parametrize("path", QUERIES, ids=[p.stem for p in QUERIES])
def test_query_runs_locally(db: duckdb.DuckDBPyConnection, path: Path) -> None:
    sql = path.read_text()
    assert sql.startswith("-- "), "the first line describes the query (the named query's description)"
    [duck] = sqlglot.transpile(sql, read="trino", write="duckdb")
    # via Arrow: DuckDB's Python rows need pytz for timestamps with a time zone
    rows = db.sql(duck).to_arrow_table().to_pylist()
    assert rows, f"{path.name} returned nothing on one run of sample rows"
    assert all(r["run_id"] == "r1" for r in rows)  # every query names the run


# ------------------------------------------------------------------------------------------------ views
VIEWS = render_template.read_views(REPO / "views")
#: DuckDB's type of a view column -> the Glue type Athena gives it (DuckDB sums BIGINT as HUGEINT; Trino as BIGINT;
#: an Iceberg table reads the files' 8-bit integers as int and their UTC timestamps as timestamp)
GLUE_OF_DUCKDB = {"VARCHAR": "string", "BIGINT": "bigint", "HUGEINT": "bigint", "INTEGER": "int",
                  "DOUBLE": "double", "BOOLEAN": "boolean", "TINYINT": "int", "SMALLINT": "int",
                  "TIMESTAMP WITH TIME ZONE": "timestamp"}


@pytest.mark.parametrize("view", VIEWS, ids=[v.name for v in VIEWS])
def test_view_runs_and_declares_the_columns_it_returns(db: duckdb.DuckDBPyConnection,
                                                        view: render_template.View) -> None:
    [duck] = sqlglot.transpile(view.sql, read="trino", write="duckdb")
    relation = db.sql(duck)
    derived = tuple((name, GLUE_OF_DUCKDB[str(t)]) for name, t in zip(relation.columns, relation.types, strict=True))
    # the Glue table's columns (what Athena checks a view against) are what the query returns
    assert view.columns == derived
    rows = relation.to_arrow_table().to_pylist()
    assert rows and all(r["run_id"] == "r1" for r in rows)
