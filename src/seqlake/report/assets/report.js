// seqlake run report: draws the plots as inline SVG from the data embedded in the page.
// No library and no network: the page must open offline, from a file or a pre-signed URL.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const H = 250, M = { l: 52, r: 12, t: 10, b: 38 };
  // beyond this many samples a panel draws their spread and the chosen sample, not every line
  const MAX_LINES = 30;
  const BASE_COLOURS = { A: "#2ca02c", C: "#1f77b4", G: "#222222", T: "#d62728", N: "#999999" };
  const SVG_NS = "http://www.w3.org/2000/svg";
  let selected = 0;

  function decode(enc) {
    const bin = atob(enc.data);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const wide = enc.codec !== "u8";
    const n = wide ? bytes.length / 2 : bytes.length;
    const missing = wide ? 65535 : 255;
    const out = new Float64Array(n);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < n; i++) {
      const q = wide ? view.getUint16(2 * i, true) : bytes[i];
      out[i] = q === missing ? NaN : enc.codec === "log16" ? Math.expm1(q / enc.scale) : q / enc.scale;
    }
    const rows = [];
    for (let s = 0; s < enc.rows; s++) rows.push(out.subarray(s * enc.cols, (s + 1) * enc.cols));
    return rows;
  }

  for (const plot of DATA.plots) {
    for (const panel of plot.panels) {
      panel.rows = {};
      for (const [name, enc] of Object.entries(panel.series)) panel.rows[name] = decode(enc);
    }
  }

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw);
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
    return ticks;
  }

  function fmt(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toPrecision(3).replace(/\.?0+$/, "") + "M";
    if (a >= 1e4) return (v / 1e3).toPrecision(3).replace(/\.?0+$/, "") + "k";
    return String(+v.toPrecision(4));
  }

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function sampleColour(i, n) {
    return `hsl(${Math.round((360 * i) / Math.max(n, 1)) % 360}, 65%, 42%)`;
  }

  function percentiles(rows, nx) {
    const out = { p10: [], p50: [], p90: [] };
    for (let j = 0; j < nx; j++) {
      const col = [];
      for (const r of rows) if (!Number.isNaN(r[j])) col.push(r[j]);
      col.sort((a, b) => a - b);
      const at = (p) => (col.length ? col[Math.min(col.length - 1, Math.floor(p * col.length))] : NaN);
      out.p10.push(at(0.1));
      out.p50.push(at(0.5));
      out.p90.push(at(0.9));
    }
    return out;
  }

  // the lines a panel draws: [{name, values, colour, width, dash}], and an optional band
  function layers(plot, panel) {
    const lines = [];
    let band = null;
    const n = DATA.samples.length;
    if (plot.kind === "components") {
      for (const [name, rows] of Object.entries(panel.rows)) {
        lines.push({ name: name, values: rows[selected], colour: BASE_COLOURS[name] || "#555", width: 1.6 });
      }
      return { lines, band };
    }
    const rows = Object.values(panel.rows)[0];
    if (n <= MAX_LINES) {
      rows.forEach((values, i) => {
        if (i !== selected) lines.push({ name: DATA.samples[i], values, colour: sampleColour(i, n), width: 1, opacity: 0.55 });
      });
    } else {
      // the spread does not depend on the chosen sample: computed once per panel
      const p = panel.spread || (panel.spread = percentiles(rows, panel.x.length));
      band = { lo: p.p10, hi: p.p90 };
      lines.push({ name: `median of ${n} samples`, values: p.p50, colour: "#666", width: 1.2, dash: "4 3" });
    }
    lines.push({ name: DATA.samples[selected], values: rows[selected], colour: sampleColour(selected, n), width: 2.2 });
    return { lines, band };
  }

  function drawPanel(plot, panel) {
    const { lines, band } = layers(plot, panel);
    const xs = panel.x;
    const W = plot.wide ? 940 : 460;
    const ty = plot.logY ? (v) => Math.log10(1 + Math.max(v, 0)) : (v) => v;
    let yHi = plot.yMax || 0;
    for (const line of lines) for (const v of line.values) if (v > yHi) yHi = v;
    if (band) for (const v of band.hi) if (v > yHi) yHi = v;
    if (!plot.logY) {
      // end the axis on a tick
      const ticks = niceTicks(0, yHi || 1, 5);
      const step = ticks.length > 1 ? ticks[1] - ticks[0] : 1;
      yHi = Math.max(yHi, ticks[ticks.length - 1]);
      if (ticks[ticks.length - 1] < yHi) yHi = ticks[ticks.length - 1] + step;
    }
    yHi = ty(yHi || 1);
    const xLo = xs[0], xHi = xs.length > 1 ? xs[xs.length - 1] : xLo + 1;
    const sx = (x) => M.l + ((x - xLo) / (xHi - xLo || 1)) * (W - M.l - M.r);
    const sy = (v) => H - M.b - (ty(v) / yHi) * (H - M.t - M.b);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart" });
    svg.appendChild(el("title", {}, `${plot.title}: ${panel.title}`));
    const axis = el("g", { class: "axis" });
    const yTicks = plot.logY
      ? [0, 1, 10, 100, 1000, 1e4, 1e5, 1e6, 1e7].filter((v) => ty(v) <= yHi * 1.0001)
      : niceTicks(0, yHi, 5);
    for (const v of yTicks) {
      const y = sy(v);
      axis.appendChild(el("line", { x1: M.l, x2: W - M.r, y1: y, y2: y, class: "grid" }));
      axis.appendChild(el("text", { x: M.l - 5, y: y + 3.5, "text-anchor": "end" }, fmt(v)));
    }
    for (const v of niceTicks(xLo, xHi, 6)) {
      if (v < xLo || v > xHi) continue;
      axis.appendChild(el("text", { x: sx(v), y: H - M.b + 14, "text-anchor": "middle" }, fmt(v)));
    }
    axis.appendChild(el("line", { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, class: "frame" }));
    axis.appendChild(el("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b, class: "frame" }));
    axis.appendChild(el("text", { x: (M.l + W - M.r) / 2, y: H - 4, "text-anchor": "middle", class: "label" }, plot.xlabel));
    axis.appendChild(el("text", { x: 12, y: (M.t + H - M.b) / 2, "text-anchor": "middle", class: "label",
      transform: `rotate(-90 12 ${(M.t + H - M.b) / 2})` }, plot.ylabel));
    svg.appendChild(axis);
    if (band) {
      const upper = [], lower = [];
      xs.forEach((x, j) => {
        if (!Number.isNaN(band.hi[j])) { upper.push(`${sx(x).toFixed(1)},${sy(band.hi[j]).toFixed(1)}`); lower.unshift(`${sx(x).toFixed(1)},${sy(band.lo[j]).toFixed(1)}`); }
      });
      if (upper.length) svg.appendChild(el("polygon", { points: upper.concat(lower).join(" "), class: "band" }));
    }
    for (const line of lines) {
      let d = "", pen = false;
      line.values.forEach((v, j) => {
        if (Number.isNaN(v)) { pen = false; return; }
        d += `${pen ? "L" : "M"}${sx(xs[j]).toFixed(1)},${sy(v).toFixed(1)}`;
        pen = true;
      });
      if (!d) continue;
      const path = el("path", { d: d, stroke: line.colour, "stroke-width": line.width, fill: "none",
        "stroke-opacity": line.opacity || 1, class: "series" });
      if (line.dash) path.setAttribute("stroke-dasharray", line.dash);
      path.appendChild(el("title", {}, line.name));
      svg.appendChild(path);
    }
    return { svg, lines, band };
  }

  function legend(plot, drawn) {
    const items = [];
    if (drawn.band) items.push(`<span><i class="swatch band"></i>10th–90th percentile of ${DATA.samples.length} samples</span>`);
    const lines = plot.kind === "samples" && !drawn.band && DATA.samples.length > 8 ? drawn.lines.slice(-1) : drawn.lines;
    for (const line of lines) {
      const name = line.name.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
      items.push(`<span><i class="swatch" style="background:${line.colour}"></i>${name}</span>`);
    }
    return items.join("");
  }

  function render() {
    for (const plot of DATA.plots) {
      const figure = document.getElementById(`plot-${plot.id}`);
      let drawn = null;
      plot.panels.forEach((panel, i) => {
        const box = figure.querySelector(`.plot[data-panel="${i}"]`);
        drawn = drawPanel(plot, panel);
        box.replaceChildren(drawn.svg);
      });
      if (drawn) figure.querySelector(".legend").innerHTML = legend(plot, drawn);
    }
    document.querySelectorAll(".chosen-sample").forEach((n) => (n.textContent = DATA.samples[selected]));
    document.querySelectorAll("#summary tbody tr").forEach((tr) => tr.classList.toggle("chosen", tr.dataset.sample === DATA.samples[selected]));
  }

  function choose(sample) {
    const i = DATA.samples.indexOf(sample);
    if (i < 0) return;
    selected = i;
    document.getElementById("sample-choice").value = sample;
    render();
  }

  function sortable(table) {
    table.querySelectorAll("th").forEach((th, col) => {
      th.addEventListener("click", () => {
        const body = table.tBodies[0];
        const desc = th.dataset.sort === "asc";
        table.querySelectorAll("th").forEach((h) => delete h.dataset.sort);
        th.dataset.sort = desc ? "desc" : "asc";
        const key = (tr) => {
          const cell = tr.cells[col];
          return cell.dataset.v !== undefined ? (cell.dataset.v === "" ? -Infinity : +cell.dataset.v) : cell.textContent;
        };
        const rows = Array.from(body.rows).sort((a, b) => {
          const ka = key(a), kb = key(b);
          const c = typeof ka === "number" ? ka - kb : String(ka).localeCompare(String(kb));
          return desc ? -c : c;
        });
        body.append(...rows);
      });
    });
  }

  const choice = document.getElementById("sample-choice");
  choice.addEventListener("change", () => choose(choice.value));
  document.querySelectorAll("#summary tbody tr").forEach((tr) => tr.addEventListener("click", () => choose(tr.dataset.sample)));
  document.querySelectorAll("table.sortable").forEach(sortable);
  const filter = document.getElementById("sample-filter");
  filter.addEventListener("input", () => {
    const q = filter.value.toLowerCase();
    document.querySelectorAll("table.per-sample tbody tr").forEach((tr) => (tr.hidden = !tr.dataset.sample.toLowerCase().includes(q)));
  });
  render();
  document.body.dataset.rendered = "true";
})();
