"""Counts and lists the docs state, checked against their one source: the tables (``lake/tables.py``), the
template's parameters and resource types (``template.yaml``), the run states (``base/model.py``), the exit
codes (``base/errors.py``); and the first deployer's path in docs/DEPLOY.md, in its order."""

from __future__ import annotations

import re

from doc_commands import DOCS, REPO, commands

from localcloud.packaging import load_template
from seqlake.base.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from seqlake.base.model import FINAL_STATES, RunState
from seqlake.lake.tables import TABLES, markdown

README = REPO / "README.md"
DEPLOY = REPO / "docs" / "DEPLOY.md"
TEMPLATE = load_template(REPO / "template.yaml")
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = text.find("\n#", start + len(heading))
    return text[start: nxt if nxt >= 0 else len(text)]


def test_tables_md_is_generated_from_tables_py() -> None:
    assert (REPO / "docs" / "TABLES.md").read_text().rstrip("\n") == markdown().rstrip("\n"), (
        "regenerate it: make docs")


def test_the_readme_lists_every_table_once() -> None:
    section = _section(README.read_text(), "## The tables")
    listed = [name for row in section.splitlines() if row.startswith("| `")
              for name in re.findall(r"`(\w+)`", row.split("|")[1])]
    assert sorted(listed) == sorted(t.name for t in TABLES)


def test_every_count_of_tables_is_the_number_of_tables() -> None:
    wrong = []
    for doc in DOCS:
        for m in re.finditer(r"\b(\d+|" + "|".join(_NUMBERS) + r") (?:Glue |result )?tables\b(?!')", doc.read_text()):
            n = _NUMBERS.get(m.group(1)) or int(m.group(1))
            if n != len(TABLES):
                wrong.append(f"{doc.name}: {m.group(0)!r} (there are {len(TABLES)})")
    assert wrong == []


def _parameter_rows() -> dict[str, str]:
    rows = {}
    for line in _section(DEPLOY.read_text(), "## 6. Parameters").splitlines():
        m = re.match(r"\| `(\w+)` \| ([^|]*) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_the_parameter_table_is_the_templates() -> None:
    rows, parameters = _parameter_rows(), TEMPLATE["Parameters"]
    assert sorted(rows) == sorted(parameters)
    for name, shown in rows.items():  # a plain number shown is the template's default
        if re.fullmatch(r"[\d,]+", shown):
            assert int(shown.replace(",", "")) == int(parameters[name]["Default"]), name
        if shown == "(required)":
            assert "Default" not in parameters[name], name


def test_the_resource_type_list_is_the_templates() -> None:
    notes = _section(DEPLOY.read_text(), "## 9. Notes for the local cloud")
    bullets = [b for b in notes.split("\n- ") if "Resource types" in b]
    assert len(bullets) == 1, "one list of resource types"
    listed = set(re.findall(r"`(AWS::\w+::\w+)`", bullets[0]))
    assert listed == {r["Type"] for r in TEMPLATE["Resources"].values()}


def test_lists_of_run_states_are_the_models() -> None:
    states = {s.value for s in RunState}
    for doc in DOCS:
        for m in re.finditer(r"`([A-Z_]+)`(?:\s*/\s*`([A-Z_]+)`)+", doc.read_text()):
            listed = set(re.findall(r"`([A-Z_]+)`", m.group(0)))
            if listed & states:
                assert listed in ({s.value for s in FINAL_STATES}, states), f"{doc.name}: {m.group(0)}"


def test_the_readme_states_the_exit_codes_of_errors_py() -> None:
    text = " ".join(README.read_text().split())
    assert (f"exits {EXIT_OK} on success, {EXIT_BAD_INPUT} on bad input" in text
            and f"{EXIT_USAGE} on a command line that does not parse, {EXIT_FAILURE} on any other failure" in text)


def _deploy_steps() -> list[str]:
    return [" ".join(c.argv) for c in commands(DEPLOY) if c.fenced]


def _first(steps: list[str], *words: str) -> int:
    return next(i for i, s in enumerate(steps) if all(w in s.split() for w in words))


def test_a_first_deploy_is_guided_into_the_environment_it_pushes_to() -> None:
    steps = _deploy_steps()
    guided = _first(steps, "sam", "deploy", "--guided")
    assert "--config-env dev" in steps[guided]
    assert guided < _first(steps, "scripts/push-worker-image.sh", "dev")


def test_an_athena_query_is_started_then_its_results_fetched() -> None:
    steps = _deploy_steps()
    assert _first(steps, "athena", "start-query-execution") < _first(steps, "athena", "get-query-results")


def test_teardown_empties_the_bucket_before_deleting_the_stack_of_its_environment() -> None:
    steps = _deploy_steps()
    delete = _first(steps, "sam", "delete")
    assert _first(steps, "s3api", "delete-objects") < delete
    assert "--config-env" in steps[delete].split()


def test_the_deploy_page_needs_one_python_for_sam_build() -> None:
    """seqlake runs on 3.11+, but `sam build` needs python3.13: the page says both, where it lists tools."""
    prerequisites = _section(DEPLOY.read_text(), "## 2. Prerequisites")
    assert "python3.13" in prerequisites and "Python 3.11+" not in prerequisites

