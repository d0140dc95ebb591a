"""The local Athena: Trino SQL on DuckDB, over registered partitions only, typed by the catalog."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from localcloud import athena
from localcloud.athena import Partition, TableDef
from localcloud.state import StateDir


def _table(partitions: tuple[Partition, ...]) -> TableDef:
    return TableDef(
        database="seqlake",
        name="t",
        location="s3://b/results/t/",
        columns=(("sample", "string"), ("reads", "bigint"), ("mate", "tinyint")),
        partition_keys=(("run_id", "string"),),
        partitions=partitions,
    )


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    s = StateDir(tmp_path)
    for run, reads in (("r1", [10, 20]), ("r2", [7]), ("r3", [1000])):
        path = s.local_path("b", f"results/t/run_id={run}/part-0.parquet")
        path.parent.mkdir(parents=True)
        # int32 in the file: the view must still give the catalog's bigint
        pq.write_table(
            pa.table(
                {
                    "sample": ["s"] * len(reads),
                    "reads": pa.array(reads, pa.int32()),
                    "mate": pa.array([1] * len(reads), pa.int8()),
                }
            ),
            path,
        )
    return s


def test_only_registered_partitions_are_visible(state: StateDir) -> None:
    # r3's parts exist but its partition was never registered (a failed or uncommitted run)
    table = _table(
        (Partition(("r1",), "s3://b/results/t/run_id=r1/"), Partition(("r2",), "s3://b/results/t/run_id=r2/"))
    )
    result = athena.query(
        [table], state.files_under, "SELECT run_id, sum(reads) AS n FROM t GROUP BY run_id ORDER BY 1"
    )
    assert result.columns == ["run_id", "n"]
    assert result.rows == [("r1", 30), ("r2", 7)]


def test_qualified_names_trino_functions_and_integer_division(state: StateDir) -> None:
    table = _table((Partition(("r1",), "s3://b/results/t/run_id=r1/"),))
    sql = (
        "SELECT 7 / 2 AS q, approx_percentile(reads, 0.5) AS med, typeof(max(reads)) AS ty, "
        "cardinality(array_agg(sample)) AS k FROM seqlake.t"
    )
    result = athena.query([table], state.files_under, sql)
    assert result.rows[0][0] == 3
    assert result.rows[0][2] == "BIGINT"
    assert result.rows[0][3] == 2
    assert result.as_text()[0][0] == "3"


def test_table_without_partitions_is_empty_with_its_schema(state: StateDir) -> None:
    result = athena.query([_table(())], state.files_under, "SELECT * FROM t")
    assert result.columns == ["sample", "reads", "mate", "run_id"]
    assert result.rows == []


def test_bad_sql_is_a_value_error(state: StateDir) -> None:
    with pytest.raises(ValueError, match="parse"):
        athena.query([_table(())], state.files_under, "SELECT FROM WHERE (")
    with pytest.raises(ValueError, match="nope"):
        athena.query([_table(())], state.files_under, "SELECT * FROM nope")


def test_catalog_round_trips_through_the_state_folder(tmp_path: Path) -> None:
    s = StateDir(tmp_path)
    table = _table((Partition(("r1",), "s3://b/results/t/run_id=r1/"),))
    s.save_catalog([table])
    assert s.catalog() == [table]
    assert athena.duckdb_type("array<string>") == "TEXT[]"


def test_an_athena_view_of_the_template_is_queried_as_athena_would(tmp_path: Path) -> None:
    """The template's views (Glue VIRTUAL_VIEW tables, the SQL in a ``/* Presto View: <base64> */``) resolved as
    the local deployer resolves them, decoded by the catalog mirror's rule, and queried over a registered table."""
    from localcloud.deployer import Deployer
    from seqlake.aws import render_template
    from seqlake.lake.tables import BY_NAME

    resources = render_template.view_resources(render_template.REPO / "views")
    view = resources["LowAmpliconsView"]["Properties"]["TableInput"]
    d = Deployer({"Parameters": {}, "Resources": {}})
    d.physical["GlueDatabase"] = "seqlake"
    text = d.resolve(view["ViewOriginalText"])
    assert view["TableType"] == "VIRTUAL_VIEW" and text.startswith("/* Presto View: ")
    sql = athena.view_query(text)
    assert sql == render_template.View.read(render_template.REPO / "views" / "low_amplicons.sql").sql
    with pytest.raises(ValueError, match="not an Athena view"):
        athena.view_query("SELECT 1")

    state = StateDir(tmp_path)
    spec = BY_NAME["amplicon_depth"]
    rows = [{"sample": "s1", "amplicon": "a1", "mean_pileup_depth": 5.0, "reads": 10, "misprimed_reads": 1,
             "dropout": True},
            {"sample": "s1", "amplicon": "a2", "mean_pileup_depth": 50.0, "reads": 30, "misprimed_reads": 0,
             "dropout": False},
            {"sample": "s1", "amplicon": None, "mean_pileup_depth": 0.0, "reads": 10, "misprimed_reads": 0}]
    path = state.local_path("b", "results/amplicon_depth/run_id=r1/part-0.parquet")
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{f.name: r.get(f.name) for f in spec.schema} for r in rows],
                                        schema=spec.schema), path)
    table = TableDef("seqlake", "amplicon_depth", "s3://b/results/amplicon_depth/",
                     tuple((c["Name"], c["Type"]) for c in spec.glue_table_input("X")["StorageDescriptor"]["Columns"]),
                     (("run_id", "string"),), (Partition(("r1",), "s3://b/results/amplicon_depth/run_id=r1/"),))
    low = TableDef("seqlake", "low_amplicons", "", (), view=sql)
    result = athena.query([low, table], state.files_under, "SELECT * FROM low_amplicons")
    assert result.columns == [n for n, _ in render_template.View.read(
        render_template.REPO / "views" / "low_amplicons.sql").columns]
    assert result.rows == [("r1", "s1", 1, 2, 10, 20.0, 1)]


def test_a_query_registers_the_tables_it_reads_through_its_views_and_no_other() -> None:
    """Each Iceberg table registered costs a scan: a query pays for the tables it names, those its views read
    (unqualified names in the view's own database, views of views), not the whole catalog's."""
    def table(db: str, name: str, view: str | None = None) -> TableDef:
        return TableDef(db, name, "", (), view=view)

    catalog = [table("seqlake", "a"), table("seqlake", "b"), table("other", "a"), table("other", "c"),
               table("seqlake", "v", view="SELECT * FROM a JOIN other.c USING (x)"),
               table("other", "w", view="WITH b AS (SELECT 1 AS x) SELECT * FROM a, b"),
               table("seqlake", "vv", view="SELECT * FROM v UNION ALL SELECT * FROM other.w")]

    def reads(sql: str) -> list[tuple[str, str]]:
        return [(t.database, t.name) for t in athena.tables_read(athena._parse(sql), catalog, "seqlake")]

    assert reads("SELECT 1") == []
    assert reads("SELECT * FROM b") == [("seqlake", "b")]
    assert reads("SELECT * FROM other.a") == [("other", "a")]
    assert reads("SELECT * FROM v") == [("seqlake", "a"), ("other", "c"), ("seqlake", "v")]
    assert reads("SELECT * FROM vv") == [("seqlake", "a"), ("other", "a"), ("other", "c"), ("seqlake", "v"),
                                         ("other", "w"), ("seqlake", "vv")]
    assert reads("SELECT * FROM nowhere") == []  # DuckDB names the missing table, as before
