"""The run as MultiQC custom content: ``*_mqc.json`` files that ``multiqc reports/<run_id>/`` renders
with no seqlake plugin (general-statistics columns, a samples table, the plots' data, trimming bars).

All sections sit under one ``seqlake`` module (``parent_id``). Line plots with one panel per mate and
stage (or per contig) are one MultiQC plot with a dataset per panel (``data_labels``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from seqlake.report.data import SUMMARY_COLUMNS, Plot, Report

MODULE = "seqlake"
_PARENT = {"parent_id": MODULE, "parent_name": "seqlake",
           "parent_description": "Read QC before and after trimming, alignment and coverage, from seqlake's tables."}


def _header(key: str, title: str, doc: str, fmt: str) -> dict[str, Any]:
    pct = key.endswith("_pct")
    out: dict[str, Any] = {"title": title, "description": doc, "namespace": MODULE,
                           "format": "{:,.0f}" if fmt.endswith("d") else "{:," + fmt + "}"}
    if pct:
        out.update({"min": 0, "max": 100, "suffix": "%"})
    return out


def _samples(report: Report, general_stats: bool) -> dict[str, dict[str, Any]]:
    cols = [c for c in SUMMARY_COLUMNS if c.general_stats or not general_stats]
    return {r.sample: {c.key: getattr(r, c.key) for c in cols if getattr(r, c.key) is not None} for r in report.rows}


def general_stats(report: Report) -> dict[str, Any]:
    return {
        "id": f"{MODULE}_general_stats", "plot_type": "generalstats",
        "headers": {c.key: _header(c.key, c.title, c.doc, c.fmt) for c in SUMMARY_COLUMNS if c.general_stats},
        "data": _samples(report, general_stats=True),
    }


def samples_table(report: Report) -> dict[str, Any]:
    return {
        **_PARENT, "id": f"{MODULE}_samples", "section_name": "Samples", "plot_type": "table",
        "description": "Per sample, both mates added up.",
        "headers": {c.key: _header(c.key, c.title, c.doc, c.fmt) for c in SUMMARY_COLUMNS},
        "pconfig": {"id": f"{MODULE}_samples_table", "title": "seqlake: samples"},
        "data": _samples(report, general_stats=False),
    }


_COMPACT = (",", ":")


def _datasets_json(report: Report, plot: Plot) -> str:
    """The plot's ``data`` (a dataset per panel, a series per sample) as JSON text, built series by
    series: as Python objects, a thousand samples' points took hundreds of MB."""
    datasets = []
    for panel in plot.panels:
        xs = np.array([f"{x:g}" for x in panel.x], dtype=object)
        series = []
        for name, matrix in panel.series.items():
            rounded, present = np.round(matrix, 4), ~np.isnan(matrix)
            for i, sample in enumerate(report.samples):
                if present[i].any():
                    points = dict(zip(xs[present[i]].tolist(), rounded[i, present[i]].tolist(), strict=True))
                    label = f"{sample} {name}" if plot.kind == "components" else sample
                    series.append(f"{json.dumps(label)}:{json.dumps(points, separators=_COMPACT)}")
        datasets.append("{" + ",".join(series) + "}")
    return "[" + ",".join(datasets) + "]"


def line_plot(report: Report, plot: Plot) -> dict[str, Any]:
    """The plot's custom-content document without its ``data`` (see :func:`_datasets_json`)."""
    pconfig: dict[str, Any] = {
        "id": f"{MODULE}_{plot.id}".replace("-", "_"), "title": f"seqlake: {plot.title}", "xlab": plot.xlabel,
        "ylab": plot.ylabel, "ymin": 0, "data_labels": [{"name": p.title} for p in plot.panels],
    }
    if plot.log_y:
        pconfig["logswitch"] = True
    if plot.y_max is not None:
        pconfig["ymax"] = plot.y_max
    return {**_PARENT, "id": pconfig["id"], "section_name": plot.title,
            "description": plot.description + (f" {plot.note}" if plot.note else ""), "plot_type": "linegraph",
            "pconfig": pconfig}


def trimming_bars(report: Report) -> dict[str, Any] | None:
    if not report.trimming:
        return None
    data = {}
    for t in report.trimming:
        removed = t.bases_quality_trimmed + t.bases_adapter_trimmed + t.bases_too_short
        data[f"{t.sample} R{t.mate}"] = {
            "kept": max(0, t.bases_in - removed), "quality": t.bases_quality_trimmed,
            "adapter": t.bases_adapter_trimmed, "short": t.bases_too_short,
        }
    return {
        **_PARENT, "id": f"{MODULE}_trimming", "section_name": "Trimming", "plot_type": "bargraph",
        "description": "Bases kept and removed by quality trimming, adapter trimming and the minimum length filter.",
        "categories": {"kept": {"name": "kept"}, "quality": {"name": "quality-trimmed"},
                       "adapter": {"name": "adapter-trimmed"}, "short": {"name": "in reads too short"}},
        "pconfig": {"id": f"{MODULE}_trimming_bars", "title": "seqlake: trimming", "ylab": "bases"},
        "data": data,
    }


def custom_content(report: Report) -> Iterator[tuple[str, bytes]]:
    """(file name, body) of every MultiQC custom-content file of the run, one file at a time."""
    for doc in (general_stats(report), samples_table(report), trimming_bars(report)):
        if doc is not None:
            yield f"{doc['id']}_mqc.json", json.dumps(doc, separators=_COMPACT).encode()
    for plot in report.plots:
        doc = line_plot(report, plot)
        head = json.dumps(doc, separators=_COMPACT)
        yield f"{doc['id']}_mqc.json", f'{head[:-1]},"data":{_datasets_json(report, plot)}}}'.encode()
