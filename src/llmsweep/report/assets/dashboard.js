/* llmsweep dashboard: dependency-free SVG scatter with per-series Pareto frontiers and a per-point drill-down.
   Reads the JSON embedded in #llmsweep-data (built by llmsweep.report.data); works from file:// with no network. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("llmsweep-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var W = 900, H = 540, M = { l: 74, r: 22, t: 18, b: 52 };
  var seriesByKey = {}, pointById = {}, axisByKey = {}, metricByKey = {};
  D.series.forEach(function (s) { seriesByKey[s.key] = s; });
  D.points.forEach(function (p) { pointById[p.id] = p; });
  D.axes.forEach(function (a) { axisByKey[a.key] = a; });
  D.metrics.forEach(function (m) { metricByKey[m.key] = m; });
  var yByKey = {};
  (D.y_axes || [D.y]).forEach(function (y) { yByKey[y.key] = y; });
  var state = { x: D.axes[0].key, y: D.y.key, frontierOnly: false, labels: true, hidden: {}, selected: null };

  function el(tag, attrs, parent, text) {
    var svg = ["svg", "g", "line", "path", "circle", "rect", "text", "polyline", "title"].indexOf(tag) >= 0;
    var n = svg ? document.createElementNS(SVGNS, tag) : document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { if (attrs[k] !== null && attrs[k] !== undefined) n.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) n.textContent = String(text);
    if (parent) parent.appendChild(n);
    return n;
  }
  function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); }
  function finite(v) { return typeof v === "number" && isFinite(v); }
  /* A count said as llmsweep.words says it: `1 point`, `3 points` (never `point(s)`); `plural` where it is not
     `singular` + s, or for a verb or pronoun that agrees with the count (`noun(n, "it", "them")`). */
  function noun(n, singular, plural) { return n === 1 ? singular : (plural === undefined ? singular + "s" : plural); }
  function countOf(n, singular, plural) { return n + " " + noun(n, singular, plural); }
  function fmt(v, unit) {
    if (!finite(v)) return "–";
    var a = Math.abs(v), s;
    if (unit === "" && a <= 1) s = (v * 100).toFixed(1) + "%";
    else if (a >= 1000) s = v.toFixed(0);
    else if (a >= 100) s = v.toFixed(1);
    else if (a >= 1) s = v.toFixed(2);
    else if (a >= 0.01) s = v.toFixed(3);
    else s = v.toPrecision(3);
    return unit && unit !== "" ? s + " " + unit : s;
  }
  function tick(t) { var a = Math.abs(t); return a >= 1e5 || (a > 0 && a < 1e-3) ? t.toPrecision(2) : String(+t.toFixed(6)); }
  function xval(p, key) { return key === "conc" ? p.metrics.conc : p.metrics[key]; }
  function yval(p) { return p.metrics[state.y]; }
  function yaxis() { return yByKey[state.y]; }
  function frontierMap() { return ((D.frontiers_by_y || {})[state.y] || (state.y === D.y.key ? D.frontiers : {}))[state.x] || {}; }
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var ticks = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
    return ticks;
  }
  function domain(vals, zero) {
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    if (zero) lo = Math.min(0, lo);
    if (hi === lo) {
      if (zero && hi === 0) hi = 1;
      else { var d = Math.abs(hi) * 0.1 || 1; lo = zero && lo >= 0 ? 0 : lo - d; hi += d; }
    }
    var pad = (hi - lo) * 0.06;
    return [zero && lo >= 0 ? 0 : lo - pad, hi + pad];
  }
  function scale(d0, r0, r1) { return function (v) { return r0 + (v - d0[0]) / (d0[1] - d0[0]) * (r1 - r0); }; }
  function onFrontier(p) { return (frontierMap()[p.series] || []).indexOf(p.id) >= 0; }
  function requestsText(p) {
    var r = p.requests || {};
    return finite(r.successful) ? r.successful + (finite(r.finished) && r.finished !== r.successful ? "/" + r.finished : "") : "–";
  }
  /* A power figure (tokens per joule, J per token, W per GPU: the metric table's `power`) the simulator's power model
     gave rather than the GPUs: marked so wherever the page shows the value (report.data: `power_source`), in the
     words `results show` marks it with (`modelled_mark`: metrics.registry.MODELLED_MARK). */
  var MODELLED = " " + D.modelled_mark;
  function modelled(p, key) {
    var m = metricByKey[key];
    return m && m.power && p.power_source === "simulated" && finite(p.metrics[key]) ? MODELLED : "";
  }
  /* The assumed price a cost figure (metrics.registry `assumed`) was figured at, after its value in the drill-down:
     a stored or reused result keeps the price of its day (report.data: `price`). */
  function priced(p, m) {
    return m.assumed && p.price && finite(p.metrics[m.key]) ? " at " + p.price : "";
  }
  /* The label drawn beside a marker: concurrency and the requests measured ("c16 · n48"). */
  function pointTag(p) { return "c" + p.metrics.conc + " · n" + requestsText(p); }
  /* Where a point `run --reuse` stood a job on came from: the run that measured it (and its job there). */
  function reusedText(p) { return p.reused ? "reused from run " + p.reused.run_id + " (job " + p.reused.job_id + ")" : ""; }
  var REUSED = D.points.filter(function (p) { return p.reused; }).length;
  /* The runs a point's repeats were reused from (`run --reuse` stood some of its repeats on stored results), one
     entry per reused repeat; none for a point reused whole, which says where it came from already. */
  function reusedRepeatRuns(p) { return p.reused ? [] : ((p.repeats || {}).reused || []).map(function (r) { return r.run_id; }); }
  /* "mean of 3 repeats" and, where --reuse took some of them from other runs, ", 2 reused from run R" (as the
     CLI's frontier and summary.md say it: results.repeats.describe_repeats). */
  var REUSED_REPEATS = D.points.filter(function (p) { return (p.in_view || p.run_id) === D.run.run_id && reusedRepeatRuns(p).length; }).length;
  function meanOf(p) {
    var from = reusedRepeatRuns(p), runs = from.filter(function (r, i) { return from.indexOf(r) === i; }).sort();
    return "mean of " + p.repeats.n + " repeats" + (runs.length ? ", " + from.length + " reused from run" +
      (runs.length > 1 ? "s " : " ") + runs.join(", ") : "");
  }
  function pointLabel(p) {
    var s = seriesByKey[p.series];
    return (s ? s.label : p.series) + " · " + p.topology + " · conc " + p.metrics.conc;
  }

  /* ---------------------------------------------------------------- header, controls, banners */
  function renderHeader() {
    var r = D.run, bits = ["run " + r.run_id];
    if (r.started) bits.push("started " + r.started);
    if (r.llmsweep_version) bits.push("llmsweep " + r.llmsweep_version);
    if (r.executor) bits.push("executor " + r.executor);
    bits.push(D.headline);  // the run's counts and sources, as summary.md says them (report.data.headline)
    document.getElementById("run-meta").textContent = bits.join(" · ");
    var b = document.getElementById("banners");
    if (D.empty) el("div", { "class": "banner empty", id: "empty-banner" }, b, D.empty + (D.missing.length ? " The reasons are listed below." : ""));
    if (D.sources.length > 1) el("div", { "class": "banner", id: "sources-banner" }, b, D.mix_sources ?
      "Sources are mixed on request (--mix-sources): " + D.sources.join(", ") + " points share series and frontiers." :
      "Several sources (" + D.sources.join(", ") + "); each source forms its own series and frontier.");
    if (D.overlays && D.overlays.length) el("div", { "class": "banner", id: "overlay-banner" }, b, "Overlaid for comparison (own series, never merged into this run's frontiers): " + D.overlays.join(", "));
    var dropped = D.overlay_notes || [];  // overlay points that are wholly points drawn already (report.data.overlay_points)
    if (dropped.length) {
      var nb = el("div", { "class": "banner", id: "overlay-notes" }, b);
      el("div", { "class": "banner-head" }, nb, countOf(dropped.length, "point") + " of the overlaid runs not drawn a second time:");
      var nl = el("ul", { "class": "reasons" }, nb);
      dropped.forEach(function (n) { el("li", null, nl, n); });
    }
    VERDICT_KINDS.forEach(function (kind) { verdictBanner(b, kind, (D.verdicts || {})[kind]); });
    ["invalid", "smoke"].forEach(function (kind) {  // the overlaid runs' (report.data.overlay_verdicts), said as theirs
      var v = (D.overlay_verdicts || {})[kind];
      if (v && v.count) reasonsBanner(b, "banner verdict overlay " + kind, "banner-overlay-" + kind, v.count,
        "Of the overlaid runs (their results, not this run's): " + VERDICT_HEAD[kind](v.count), v.reasons);
    });
    var unrecorded = D.power_unrecorded || [];
    var nPower = unrecorded.reduce(function (n, g) { return n + g.count; }, 0);
    reasonsBanner(b, "banner power-unrecorded", "banner-power", nPower, countOf(nPower, "point") + " " +
      noun(nPower, "has", "have") + " no GPU power: no power backend could sample where " + noun(nPower, "it", "they") +
      " ran, the simulator does not model " + noun(nPower, "its", "their") + " power, or `--reuse` stood " +
      noun(nPower, "it", "them") + " on a stored result that recorded none, so " +
      noun(nPower, "it has", "they have") + " no energy-per-token figures (why, and how to record it):", unrecorded);
  }
  var VERDICT_KINDS = ["invalid", "eval-failed", "smoke", "refused", "failed", "reused", "simulated-only", "not-modelled", "catalog-estimates", "engine-version", "context-served", "no-gpu", "timeout-not-applied"];
  var VERDICT_HEAD = {
    invalid: function (n) { return countOf(n, "invalid point") + ": drawn as hollow dashed markers and excluded from frontiers."; },
    "eval-failed": function (n) { return countOf(n, "eval") + " did not pass (scores and thresholds in the Evaluation table below):"; },
    smoke: function (n) { return countOf(n, "smoke result") + ": " + noun(n, "it", "they") + " ran, but too little to be valid (a point is drawn faded, never on a frontier; an eval passed on too few samples to stand); read " + noun(n, "it as a smoke test, not as a result", "them as a smoke test, not as results") + "."; },
    refused: function (n) { return countOf(n, "job") + " refused before running, so " + noun(n, "it has", "they have") + " no point:"; },
    failed: function (n) { return countOf(n, "job") + " without a result:"; },
    reused: function (n) { var now = ((D.counts || {}).points || 0) - REUSED; return countOf(n, "job") + " not run: --reuse stood " + noun(n, "it", "them") + " on stored results of earlier runs; " + noun(n, "its point is", "their points are") + " drawn as diamonds with the verdict and figures the run that measured " + noun(n, "it", "them") + " stored" + (now > 0 ? " (the rest were measured now)" : "") + (REUSED_REPEATS ? "; " + countOf(REUSED_REPEATS, "point") + " measured now in part " + noun(REUSED_REPEATS, "is", "are") + " the mean of every repeat, those reused included" : "") + ":"; },
    "simulated-only": function (n) { return countOf(n, "point") + " the simulator ran although a real engine would refuse " + noun(n, "it", "them") + " (its engine rules are warnings under the simulator):"; },
    "not-modelled": function (n) { return countOf(n, "point") + " the simulator predicted without modelling all " + noun(n, "its", "their") + " jobs set: a real engine would run " + noun(n, "it", "them") + ", and " + noun(n, "this point predicts it", "these points predict them") + " without modelling it:"; },
    "catalog-estimates": function (n) { return countOf(n, "point") + " the simulator modelled with catalog figures the catalog marks as estimates, not sourced (a model's shape, a GPU's memory or bandwidth): " + noun(n, "this prediction is", "these predictions are") + " no surer than those figures (`llmsweep catalog --json models|hardware` says how each was estimated):"; },
    "engine-version": function (n) { return countOf(n, "point") + " served by another engine version than " + noun(n, "its", "their") + " recipe declares: each is labelled with the version that ran, and its feature gates were judged at the declared one:"; },
    "context-served": function (n) { return countOf(n, "point") + " whose server reported another context length than " + noun(n, "its", "their") + " launch set: job.json keeps the launch's, provenance (launch.context_served) the server's:"; },
    "no-gpu": function (n) { return countOf(n, "point") + " served on no GPU (a CPU rehearsal): " + noun(n, "its", "their") + " per-GPU figures are the endpoint's, which no GPU served:"; },
    "timeout-not-applied": function (n) { return countOf(n, "point") + " ran in virtual time with requests longer than --request-timeout, which virtual time does not apply: a live client would have timed them out (--live applies it):"; }
  };
  /* One banner per verdict kind; identical reasons (up to their numbers) are one line with a count. */
  function verdictBanner(parent, kind, v) {
    if (!v || !v.count) return;
    reasonsBanner(parent, "banner verdict " + kind, "banner-" + kind, v.count, VERDICT_HEAD[kind](v.count), v.reasons);
  }
  function reasonsBanner(parent, cls, id, count, head, reasons) {
    if (!count) return;
    var box = el("div", { "class": cls, id: id, "data-count": count }, parent);
    el("div", { "class": "banner-head" }, box, head);
    var ul = el("ul", { "class": "reasons" }, box);
    reasons.forEach(function (g) {
      var li = el("li", { "data-count": g.count }, ul);
      el("span", { "class": "count-badge" }, li, "×" + g.count);
      li.appendChild(document.createTextNode(" " + g.reason));
      if (g.detail) {  // the whole reason of one of the jobs (the server log's last lines)
        var full = el("details", { "class": "detail" }, li);
        el("summary", null, full, "full reason" + (g.count > 1 ? " (of the first)" : ""));
        el("pre", null, full, g.detail);
      }
      var pts = g.ids.map(function (id) { return pointById[id]; }).filter(Boolean);
      var jobs = g.ids.filter(function (id) { return !pointById[id]; });  // no point drawn: named by job id
      if (pts.length) {
        el("span", { "class": "which" }, li, " — " + whichPoints(pts) + (jobs.length ? " and" : ""));
      }
      if (jobs.length) {
        var det = el("details", { "class": "which" }, li);
        el("summary", null, det, pts.length ? countOf(jobs.length, "more job") : noun(jobs.length, "job"));
        el("div", { "class": "ids" }, det, jobs.join("\n"));
      }
    });
  }
  /* Which points a banner line is about: `conc 4, 8` when the page has one series; otherwise each series named with
     its concurrencies (`<series> · conc 4, 8; <series> · conc 16`), since several series share a concurrency. */
  function whichPoints(pts) {
    var bySeries = {}, order = [];
    pts.forEach(function (p) {
      if (!bySeries[p.series]) { bySeries[p.series] = []; order.push(p.series); }
      if (bySeries[p.series].indexOf(p.metrics.conc) < 0) bySeries[p.series].push(p.metrics.conc);
    });
    var rank = {};
    D.series.forEach(function (s, i) { rank[s.key] = i; });
    order.sort(function (a, b) { return rank[a] - rank[b]; });
    return order.map(function (sk) {
      var concs = "conc " + bySeries[sk].sort(function (a, c) { return a - c; }).join(", ");
      return D.series.length > 1 ? (seriesByKey[sk] ? seriesByKey[sk].label : sk) + " · " + concs : concs;
    }).join("; ");
  }
  function renderControls() {
    var sel = document.getElementById("x-axis");
    D.axes.forEach(function (a) { el("option", { value: a.key }, sel, a.label + (a.unit ? " (" + a.unit + ")" : "")); });
    sel.value = state.x;
    sel.addEventListener("change", function () { state.x = sel.value; writeHash(); renderAll(); });
    var ysel = document.getElementById("y-axis");
    (D.y_axes || [D.y]).forEach(function (y) { el("option", { value: y.key }, ysel, y.label + " (" + y.unit + ")" + (y.direction === "min" ? ", lower is better" : "")); });
    ysel.value = state.y;
    ysel.addEventListener("change", function () { state.y = ysel.value; writeHash(); renderAll(); });
    var fo = document.getElementById("frontier-only");
    fo.addEventListener("change", function () { state.frontierOnly = fo.checked; renderChart(); });
    document.getElementById("tag-key").textContent = D.tag_key;  // what a label counts, as the PNGs' title says it
    // the key of the bars of a mean of repeats, in the words the PNGs' key says it (report.data.REPEATS_SPREAD)
    if (D.points.some(function (p) { return p.spread; })) el("span", { id: "spread-key" }, document.querySelector(".controls .note"),
      " Bars across a point that is the mean of its repeats (run --repeats) span " + D.repeats_spread + ".");
    // a modelled power figure is marked where it is shown: the key says what the mark means
    if (D.points.some(function (p) { return p.power_source === "simulated"; })) el("span", { id: "power-key" }, document.querySelector(".controls .note"),
      " A power figure (tokens per joule, energy per token, power per GPU) followed by" + MODELLED + " is the simulator's power model's, not measured on a GPU.");
    var lb = document.getElementById("point-labels");
    lb.checked = state.labels;
    lb.addEventListener("change", function () { state.labels = lb.checked; renderChart(); });
  }
  function renderLegend() {
    var box = document.getElementById("legend-items");
    clear(box);
    D.series.forEach(function (s) {
      var pts = D.points.filter(function (p) { return p.series === s.key; });
      var bad = pts.filter(function (p) { return !p.valid; }).length;
      var smoke = pts.filter(function (p) { return p.verdict === "smoke"; }).length;
      var reused = pts.filter(function (p) { return p.reused; }).length;
      var item = el("label", { "class": "item", "data-series": s.key }, box);
      var cb = el("input", { type: "checkbox" }, item);
      cb.checked = !state.hidden[s.key];
      cb.addEventListener("change", function () { state.hidden[s.key] = !cb.checked; renderChart(); });
      el("span", { "class": "sw", style: "background:" + s.color }, item);
      var txt = el("span", null, item);
      el("div", null, txt, s.label);
      el("div", { "class": "count" }, txt, countOf(pts.length, "point") + (smoke ? ", " + smoke + " smoke" : "") + (bad ? ", " + bad + " invalid" : "") + (reused ? ", " + reused + " reused" : "") + " · " + s.source);
      // a series without a frontier on these axes says why (report.data.frontier_gaps): all smoke, say
      var gap = (((D.no_frontier || {})[state.y] || {})[state.x] || {})[s.key];
      if (gap) el("div", { "class": "count no-frontier" }, txt, "no frontier: " + gap);
      // series whose points coincide on these axes: said, not moved (report.data.coinciding_series)
      var same = (((D.coincident || {})[state.y] || {})[state.x] || {})[s.key];
      if (same) el("div", { "class": "count coincide" }, txt, same);
    });
  }

  /* ---------------------------------------------------------------- main chart */
  function renderChart() {
    var svg = document.getElementById("chart"), axis = axisByKey[state.x];
    clear(svg);
    var plotted = D.points.filter(function (p) { return finite(xval(p, state.x)) && finite(yval(p)); });
    var unplotted = D.points.filter(function (p) { return plotted.indexOf(p) < 0; });
    var note = document.getElementById("unplotted");
    note.textContent = unplotted.length ? countOf(unplotted.length, "point") + " " + noun(unplotted.length, "lacks", "lack") + " " + axis.label + " or " + yaxis().label +
      " and " + noun(unplotted.length, "is", "are") + " listed in the table but not plotted: " + unplotted.map(function (p) { return p.job_id; }).join(", ") : "";
    if (!D.points.length) svg.setAttribute("viewBox", "0 0 " + W + " 120");  // no result: a line, not an empty frame
    if (!plotted.length) {
      var nEvals = (D.evals || []).length;
      var msg = D.points.length ? "no point has values for " + axis.label + " and " + yaxis().label + " (choose another axis)"
        : nEvals ? "no throughput point to plot: the run's results are evals (" + nEvals + " eval" + (nEvals === 1 ? "" : "s") + ", in the Evaluation table below)"
        : "no result to plot: " + (D.missing.length ? "every expected job was refused, failed or reused (reasons above)" : "the run has no job");
      el("text", { x: W / 2, y: D.points.length ? H / 2 : 64, "text-anchor": "middle", "class": "axis-title", id: "chart-empty" }, svg, msg);
      return;
    }
    // the axes reach the ends of the bars of a mean of repeats (report.data.spread_bounds); y from 0, as the PNGs
    var xs = [], ys = [];
    plotted.forEach(function (p) {
      xs.push(xval(p, state.x)); ys.push(yval(p));
      var sx0 = spreadOf(p, state.x), sy0 = spreadOf(p, state.y);
      if (sx0) xs.push(sx0[0], sx0[1]);
      if (sy0) ys.push(Math.max(0, sy0[0]), sy0[1]);
    });
    var xd = domain(xs, false);
    var yd = domain(ys, true);
    var sx = scale(xd, M.l, W - M.r), sy = scale(yd, H - M.b, M.t);
    var grid = el("g", { "class": "grid" }, svg), ax = el("g", { "class": "axis" }, svg);
    niceTicks(xd[0], xd[1], 8).forEach(function (t) {
      if (t < xd[0] || t > xd[1]) return;
      el("line", { x1: sx(t), x2: sx(t), y1: M.t, y2: H - M.b }, grid);
      el("text", { x: sx(t), y: H - M.b + 16, "text-anchor": "middle" }, ax, tick(t));
    });
    niceTicks(yd[0], yd[1], 7).forEach(function (t) {
      if (t < yd[0] || t > yd[1]) return;
      el("line", { x1: M.l, x2: W - M.r, y1: sy(t), y2: sy(t) }, grid);
      el("text", { x: M.l - 7, y: sy(t) + 4, "text-anchor": "end" }, ax, tick(t));
    });
    el("line", { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, stroke: "#98a2b3" }, ax);
    el("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b, stroke: "#98a2b3" }, ax);
    var dirNote = axis.direction === "max" ? " → better" : axis.direction === "min" ? " ← better" : "";
    el("text", { x: (M.l + W - M.r) / 2, y: H - 12, "text-anchor": "middle", "class": "axis-title", id: "x-title" }, svg, axis.label + (axis.unit ? " (" + axis.unit + ")" : "") + dirNote);
    el("text", { x: 16, y: (M.t + H - M.b) / 2, "text-anchor": "middle", "class": "axis-title", id: "y-title", transform: "rotate(-90 16 " + (M.t + H - M.b) / 2 + ")" }, svg, yaxis().label + " (" + yaxis().unit + ")" + (yaxis().direction === "min" ? " ↓ better" : ""));
    var fr = frontierMap();
    // in the legend's order, as the markers and the PNGs' lines: a series drawn under another is so in all of them
    D.series.map(function (s) { return s.key; }).forEach(function (sk) {
      if (state.hidden[sk] || !fr[sk] || fr[sk].length < 1) return;
      var pts = fr[sk].map(function (id) { return pointById[id]; });
      el("polyline", { "class": "frontier", "data-series": sk, stroke: seriesByKey[sk].color,
        points: pts.map(function (p) { return sx(xval(p, state.x)).toFixed(1) + "," + sy(yval(p)).toFixed(1); }).join(" ") }, svg);
    });
    var tip = document.getElementById("tooltip");
    // a point that is the mean of its repeats: bars of its repeats' spread on each axis that has one, under the markers
    plotted.forEach(function (p) {
      var bx = spreadOf(p, state.x), by = spreadOf(p, state.y);
      if (!bx && !by) return;
      var g = el("g", { "class": "spread" + (state.hidden[p.series] || (state.frontierOnly && !onFrontier(p)) ? " dim" : ""),
        "data-id": p.id, "data-series": p.series, stroke: seriesByKey[p.series].color }, svg);
      var cx = sx(xval(p, state.x)), cy = sy(yval(p)), cap = 3;
      if (bx) {
        el("line", { "class": "spread-x", x1: sx(bx[0]).toFixed(2), x2: sx(bx[1]).toFixed(2), y1: cy.toFixed(2), y2: cy.toFixed(2),
          "data-lo": bx[0], "data-hi": bx[1] }, g);
        [bx[0], bx[1]].forEach(function (v) { el("line", { x1: sx(v).toFixed(2), x2: sx(v).toFixed(2), y1: (cy - cap).toFixed(2), y2: (cy + cap).toFixed(2) }, g); });
      }
      if (by) {
        var lo = Math.max(yd[0], by[0]);  // below 0 the axis stops, and the bar with it (as in the PNGs)
        el("line", { "class": "spread-y", x1: cx.toFixed(2), x2: cx.toFixed(2), y1: sy(lo).toFixed(2), y2: sy(by[1]).toFixed(2),
          "data-lo": by[0], "data-hi": by[1] }, g);
        [lo, by[1]].forEach(function (v) { el("line", { x1: (cx - cap).toFixed(2), x2: (cx + cap).toFixed(2), y1: sy(v).toFixed(2), y2: sy(v).toFixed(2) }, g); });
      }
    });
    // a point that coincides with one labelled already (same values on both axes, same tag: the arms of a sweep that
    // came out identical) is not labelled again: its label had been drawn twice, one under the other; the legend says
    // which series coincide (report.data.coinciding_series), as the PNGs do (report.plots.label_points)
    var labels = el("g", { "class": "pt-labels" }, svg), placed = [], labelled = {};
    plotted.forEach(function (p) {
      var s = seriesByKey[p.series], front = onFrontier(p), smoke = p.verdict === "smoke";
      var cls = "marker" + (p.valid ? "" : " invalid") + (smoke ? " smoke" : "") + (front ? " onfront" : " offfront") + (state.selected === p.id ? " selected" : "");
      var dim = state.hidden[p.series] || (state.frontierOnly && !front);
      if (dim) cls += " dim";
      var cx = sx(xval(p, state.x)), cy = sy(yval(p));
      if (p.eval && p.eval.verdict !== "valid")  // red: an eval that missed its thresholds; dashed grey: a smoke eval
        el("circle", { "class": p.eval.verdict === "smoke" ? "eval-smoke" : "eval-failed", cx: cx.toFixed(2),
          cy: cy.toFixed(2), r: 9, fill: "none", stroke: p.eval.verdict === "smoke" ? "#667085" : "#d92d20",
          "stroke-width": 2, "stroke-dasharray": p.eval.verdict === "smoke" ? "3 2" : null, "data-id": p.id }, svg);
      var r = front ? 6 : p.valid ? 4.5 : 6, attrs = { "class": cls, fill: s.color,
        style: p.valid && !smoke && !p.reused ? null : "stroke:" + s.color, "data-id": p.id, "data-series": p.series,
        "data-x": xval(p, state.x), "data-y": yval(p), "data-valid": p.valid ? "1" : "0", "data-verdict": p.verdict };
      var c;
      if (p.reused) {  // a diamond: the shape says where a point came from, its fill (as a circle's) its verdict
        var d = r * 1.45;
        attrs["class"] += " reused";
        attrs["data-reused-from"] = p.reused.run_id;
        attrs.d = "M" + cx.toFixed(2) + " " + (cy - d).toFixed(2) + "L" + (cx + d).toFixed(2) + " " + cy.toFixed(2) +
          "L" + cx.toFixed(2) + " " + (cy + d).toFixed(2) + "L" + (cx - d).toFixed(2) + " " + cy.toFixed(2) + "Z";
        c = el("path", attrs, svg);
      } else {
        attrs.cx = cx.toFixed(2); attrs.cy = cy.toFixed(2); attrs.r = r;
        c = el("circle", attrs, svg);
      }
      var spot = pointTag(p) + "@" + xval(p, state.x) + "," + yval(p);
      if (state.labels && !dim) {
        if (labelled[spot]) labelled[spot].setAttribute("data-ids", labelled[spot].getAttribute("data-ids") + " " + p.id);
        else labelled[spot] = placeLabel(labels, placed, p, cx, cy);
      }
      c.addEventListener("mouseenter", function (ev) { showTip(ev, p); });
      c.addEventListener("mousemove", function (ev) { moveTip(ev); });
      c.addEventListener("mouseleave", function () { tip.style.display = "none"; });
      c.addEventListener("click", function () { openDrill(p.id); });
    });
  }
  function repeatsText(p) {  // a point that combines the repeats of one job (run --repeats): its figures are their mean
    var a = axisByKey[state.x], sds = [[yaxis(), p.repeats.sd[state.y], state.y], [a, p.repeats.sd[state.x], state.x]].filter(function (m) {
      return finite(m[1]); }).map(function (m) { return m[0].label + " sd " + fmt(m[1], m[0].unit) + modelled(p, m[2]); });
    return meanOf(p) + (sds.length ? " (" + sds.join(", ") + "; the bars span " + D.repeats_spread + ")" : "");
  }
  /* [mean - sd, mean + sd] of a point that is the mean of its repeats, on one metric (report.data.spread_bounds:
     the span the PNGs draw too); null for a single result or a metric without a spread. */
  function spreadOf(p, key) {
    var b = (p.spread || {})[key];
    return b && finite(b[0]) && finite(b[1]) ? b : null;
  }
  function showTip(ev, p) {
    var tip = document.getElementById("tooltip"), a = axisByKey[state.x];
    clear(tip);
    el("div", { style: "font-weight:600" }, tip, pointLabel(p));
    el("div", null, tip, a.label + ": " + fmt(xval(p, state.x), a.unit) + modelled(p, state.x));
    el("div", null, tip, yaxis().label + ": " + fmt(yval(p), yaxis().unit) + modelled(p, state.y));
    el("div", null, tip, "P90 TTFT " + fmt(p.metrics.p90_ttft, "s") + " · P90 E2EL " + fmt(p.metrics.p90_e2el, "s"));
    el("div", null, tip, "requests measured: " + requestsText(p) + " successful" + (finite((p.requests || {}).finished) ? " of " + p.requests.finished : ""));
    el("div", null, tip, "verdict: " + p.verdict + (p.reason ? " — " + p.reason : "") + " · source: " + p.source);
    (p.warnings || []).forEach(function (w) { el("div", { "class": "tip-warning" }, tip, WARN + " " + w); });
    if (p.reused) el("div", { "class": "tip-reused" }, tip, reusedText(p) + ": measured there, not in this run");
    if (p.repeats) el("div", { "class": "tip-repeats" }, tip, repeatsText(p));
    if (p.eval) el("div", { "class": "tip-eval" }, tip, "eval " + p.eval.task + ": " + fmt(p.eval.score, "") + " — " + p.eval.verdict + (p.eval.reason ? " (" + p.eval.reason + ")" : ""));
    el("div", null, tip, onFrontier(p) ? "on the frontier" : "not on the frontier");
    el("div", { style: "opacity:.7" }, tip, "click for details");
    tip.style.display = "block";
    moveTip(ev);
  }
  function moveTip(ev) {
    var tip = document.getElementById("tooltip"), box = document.getElementById("chart-wrap").getBoundingClientRect();
    var x = ev.clientX - box.left + 14, y = ev.clientY - box.top + 10;
    if (x + 300 > box.width) x = Math.max(0, x - 330);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }

  /* A marker's label goes to the first spot around it that overlaps no label already placed and stays inside the
     plot (above-right first; a frontier usually reaches a point from the left), else further below. */
  function placeLabel(parent, placed, p, cx, cy) {
    var text = pointTag(p), w = text.length * 5.9 + 2, h = 12;
    var spots = [[8, -6, "start"], [8, 15, "start"], [-8, -6, "end"], [-8, 15, "end"], [8, -18, "start"], [8, 27, "start"],
                 [-8, -18, "end"], [-8, 27, "end"]];
    var best = null;
    for (var i = 0; i < spots.length; i++) {
      var x = cx + spots[i][0], y = cy + spots[i][1], x0 = spots[i][2] === "start" ? x : x - w;
      var box = { x0: x0, x1: x0 + w, y0: y - h + 2, y1: y + 2 };
      if (box.x0 < M.l || box.x1 > W - M.r + 18 || box.y0 < 0 || box.y1 > H - M.b) continue;
      var clash = placed.some(function (b) { return b.x0 < box.x1 && box.x0 < b.x1 && b.y0 < box.y1 && box.y0 < b.y1; });
      if (!clash) { best = [x, y, spots[i][2], box]; break; }
      if (!best) best = [x, y, spots[i][2], box];
    }
    if (!best) best = [cx + 8, cy - 6, "start", { x0: cx + 8, x1: cx + 8 + w, y0: cy - 16, y1: cy - 4 }];
    placed.push(best[3]);
    return el("text", { "class": "pt-label", x: best[0].toFixed(1), y: best[1].toFixed(1), "text-anchor": best[2], "data-id": p.id,
      "data-ids": p.id }, parent, text);
  }

  /* ---------------------------------------------------------------- table */
  var FIXED_COLS = ["p90_e2e_norm_intvty", "p90_intvty", "p90_ttft", "p90_e2el", "error_ratio"];
  /* Columns: the x and y of the chart, then the fixed metrics that are neither (no column twice). */
  function tableCols() {
    var cols = [["series", "Series"], ["conc", "Conc"], ["requests", "Requests (ok)"], ["topology", "Topology"]];
    if (state.x !== "conc") cols.push(["x", colTitle(axisByKey[state.x])]);
    cols.push(["y", colTitle(yaxis())]);
    FIXED_COLS.forEach(function (k) {
      if (k !== state.x && k !== state.y && metricByKey[k]) cols.push([k, k === "error_ratio" ? "Errors" : colTitle(metricByKey[k])]);
    });
    cols = cols.concat([["verdict", "Verdict"], ["reason", "Reason"], ["source", "Source"], ["front", "Frontier"]]);
    return REUSED || REUSED_REPEATS ? cols.concat([["reused", "Reused from"]]) : cols;
  }
  /* Tables show a latency (stored in s) in ms, as summary.md and every CLI table do (HotColumn.table_unit); the
     chart's axes keep the stored unit. */
  function tableUnit(unit) { return unit === "s" ? "ms" : unit; }
  function tableValue(v, unit) { return unit === "s" && finite(v) ? v * 1000 : v; }
  function colTitle(m) { var u = tableUnit(m.unit); return m.label + (u ? " (" + u + ")" : ""); }
  function colUnit(key) { return key === "x" ? axisByKey[state.x].unit : key === "y" ? yaxis().unit : (metricByKey[key] || {}).unit; }
  var sortKey = null, sortDir = 1;
  /* A point whose job's outcome carries warnings (the simulator ran it although a real engine would refuse it, or
     does not model what it sets): its verdict is marked and the warnings are said in its reason. */
  var WARN = "⚠";
  function warned(p) { return (p.warnings || []).length > 0; }
  /* A point whose job's eval did not pass keeps its throughput verdict, but is ringed red (dashed grey where the eval
     passed on too few samples to stand: smoke): its reason says why. */
  function evalFailure(p) {
    return p.eval && p.eval.verdict !== "valid" ? p.eval.reason || "eval " + p.eval.task + " " + p.eval.verdict : "";
  }
  /* Every repeat's own reasons, its job named, of a point that is the mean of its repeats: the Reason cell says
     each cause once with a count (report.data.repeats_reason), its tooltip and the drill-down say them all. */
  function repeatReasons(p) { return p.repeats && p.reason ? (p.reasons || []).join("\n") : null; }
  function cell(p, key) {
    if (key === "series") return seriesByKey[p.series].label;
    if (key === "conc") return p.metrics.conc;
    if (key === "requests") return (p.requests || {}).successful;
    if (key === "topology") return p.topology;
    if (key === "x") return xval(p, state.x);
    if (key === "y") return yval(p);
    // a point that is the mean of its repeats says so, as summary.md's verdict column does: its requests are theirs
    if (key === "verdict") return p.verdict + (warned(p) ? " " + WARN : "") + (p.repeats ? " (" + meanOf(p) + ")" : "");
    if (key === "reason") return [p.reason || "", evalFailure(p)].concat((p.warnings || []).map(function (w) { return WARN + " " + w; })).filter(Boolean).join("; ");
    if (key === "source") return p.source;
    if (key === "front") return onFrontier(p) ? "yes" : "";
    if (key === "reused") {
      var from = p.reused ? [p.reused.run_id] : reusedRepeatRuns(p);
      return from.length ? "run " + from.filter(function (r, i) { return from.indexOf(r) === i; }).join(", ") : "";
    }
    return p.metrics[key];
  }
  function renderTable() {
    var t = document.getElementById("points-table"), cols = tableCols();
    clear(t);
    var head = el("tr", null, el("thead", null, t));
    cols.forEach(function (c) {
      var th = el("th", { "data-col": c[0] }, head, c[1] + (sortKey === c[0] ? (sortDir > 0 ? " ▲" : " ▼") : ""));
      th.addEventListener("click", function () { sortDir = sortKey === c[0] ? -sortDir : 1; sortKey = c[0]; renderTable(); });
    });
    // D.points comes sorted by series, then concurrency as a number; a clicked column sorts on top of that order.
    var body = el("tbody", null, t), rank = {}, rows = D.points.slice();
    D.points.forEach(function (p, i) { rank[p.id] = i; });
    var seriesRank = {};
    D.series.forEach(function (s, i) { seriesRank[s.key] = i; });
    if (sortKey) rows.sort(function (a, b) {
      var va = sortKey === "series" ? seriesRank[a.series] : cell(a, sortKey), vb = sortKey === "series" ? seriesRank[b.series] : cell(b, sortKey);
      var na = va === null || va === undefined || va === "", nb = vb === null || vb === undefined || vb === "";
      if (na || nb || va === vb) return na === nb ? rank[a.id] - rank[b.id] : na ? 1 : -1;
      return (va < vb ? -1 : 1) * sortDir;
    });
    rows.forEach(function (p) {
      var tr = el("tr", { "class": "clickable " + p.verdict + (p.valid ? "" : " invalid") + (p.reused ? " reused" : ""), "data-id": p.id,
        title: p.reused ? reusedText(p) : null }, body);
      cols.forEach(function (c) {
        var v = cell(p, c[0]), num = typeof v === "number", raw = c[0] === "conc" || c[0] === "requests";
        var metric = c[0] === "x" || c[0] === "y" || !!metricByKey[c[0]];  // a missing value reads "–", not blank
        var txt = c[0] === "requests" ? requestsText(p) : num && !raw ? fmt(tableValue(v, colUnit(c[0])), colUnit(c[0]) === "" ? "" : null)
          + modelled(p, c[0] === "x" ? state.x : c[0] === "y" ? state.y : c[0])
          : metric && (v === null || v === undefined) ? "–" : v;
        el("td", { "class": (num || raw ? "num" : "") + (c[0] === "reason" ? " reason" : "") || null, "data-col": c[0],
          title: c[0] === "reason" ? repeatReasons(p) : null }, tr, txt);
      });
      tr.addEventListener("click", function () { openDrill(p.id); });
    });
    var vcol = cols.map(function (c) { return c[0]; }).indexOf("verdict");
    D.missing.forEach(function (m) {
      var tr = el("tr", { "class": "missing " + m.kind, "data-job": m.job_id }, body);
      el("td", { colspan: vcol, "class": "job" }, tr, "job " + m.job_id);
      el("td", { "data-col": "verdict" }, tr, m.status);
      el("td", { "class": "reason", "data-col": "reason" }, tr, m.reason);
      el("td", { colspan: cols.length - vcol - 2 }, tr, "");
    });
  }

  /* ---------------------------------------------------------------- drill-down */
  function mini(parent, title, draw, hasData) {
    var box = el("div", { "class": "mini" }, parent);
    el("h4", null, box, title);
    if (!hasData) { el("div", { "class": "empty" }, box, "no data in the artifacts"); return; }
    var svg = el("svg", { viewBox: "0 0 340 170" }, box);
    draw(svg);
  }
  function frame(svg, xd, yd, yfmt) {
    var m = { l: 46, r: 8, t: 8, b: 22 }, w = 340, h = 170;
    var sx = scale(xd, m.l, w - m.r), sy = scale(yd, h - m.b, m.t);
    var g = el("g", { "class": "mini" }, svg);
    el("line", { x1: m.l, x2: w - m.r, y1: h - m.b, y2: h - m.b, stroke: "#98a2b3" }, g);
    el("line", { x1: m.l, x2: m.l, y1: m.t, y2: h - m.b, stroke: "#98a2b3" }, g);
    niceTicks(xd[0], xd[1], 5).forEach(function (t) { if (t >= xd[0] && t <= xd[1]) el("text", { x: sx(t), y: h - 7, "text-anchor": "middle" }, g, tick(t)); });
    niceTicks(yd[0], yd[1], 4).forEach(function (t) { if (t >= yd[0] && t <= yd[1]) el("text", { x: m.l - 4, y: sy(t) + 3, "text-anchor": "end" }, g, yfmt ? yfmt(t) : tick(t)); });
    return { sx: sx, sy: sy };
  }
  function line(parent, title, pts, color, yfmt, zero) {
    var ok = (pts || []).filter(function (q) { return finite(q[0]) && finite(q[1]); });
    mini(parent, title, function (svg) {
      var f = frame(svg, domain(ok.map(function (q) { return q[0]; })), domain(ok.map(function (q) { return q[1]; }), zero !== false), yfmt);
      el("polyline", { fill: "none", stroke: color, "stroke-width": 1.6, points: ok.map(function (q) { return f.sx(q[0]).toFixed(1) + "," + f.sy(q[1]).toFixed(1); }).join(" ") }, svg);
    }, ok.length > 0);
  }
  function pct(t) { return +(t * 100).toPrecision(3) + "%"; }
  /* The requests a point measured, as its label's n counts them; for a mean of repeats, every repeat's, and how many
     of them the timeline below draws (its first repeat's: report.data.requests_counted), so the two counts agree. */
  function measuredText(p, d) {
    var mine = (d.counted || {}).measured;
    var r = p.requests || {};
    return requestsText(p) + " " + noun(finite(r.finished) ? r.finished : r.successful, "request") + " measured" + (p.repeats && finite(mine) ? " over its " + p.repeats.n +
      " repeats, " + mine + " of them by result " + p.id + " (the timeline below)" : "");
  }
  /* What the timeline draws, counted as the result's summary counts its requests (measured: the point's n). */
  function timelineTitle(d) {
    var c = d.counted, drawn = d.requests_shown < d.requests_total ? "; " + d.requests_shown + " of " + d.requests_total + " drawn" : "";
    if (!c) return "Request timeline (" + d.requests_shown + " of " + d.requests_total + " requests; grey warm-up, red failed)";
    var parts = [c.measured + " measured"];
    if (c.failed) parts.push(c.failed + " failed");
    if (c.cancelled) parts.push(c.cancelled + " cancelled");
    if (c.warmup) parts.push(c.warmup + " warm-up");
    return "Request timeline (" + parts.join(" + ") + " requests" + drawn + "; grey warm-up, red failed)";
  }
  function drillCharts(parent, d, color) {
    if (d.records_note) el("p", { "class": "records-incomplete" }, parent, d.records_note);  // report.data.records_note
    // the charts' x axis has ticks and no title: its unit and zero said once (report.timeseries: t0)
    el("p", { "class": "note", id: "drill-time" }, parent, "Charts over time: x is seconds from the first profiled request (warm-up requests fall before 0).");
    var grid = el("div", { "class": "minis" }, parent);
    var tl = (d.timeline || []).filter(function (r) { return finite(r[0]); });
    mini(grid, timelineTitle(d), function (svg) {
      var ends = tl.map(function (r) { return finite(r[2]) ? r[2] : r[0]; });
      var f = frame(svg, domain(tl.map(function (r) { return r[0]; }).concat(ends)), [0, tl.length], function () { return ""; });
      var wait = "", dec = "", bad = "", warm = "";
      tl.forEach(function (r, i) {
        var y = f.sy(i + 0.5).toFixed(1), x0 = f.sx(r[0]).toFixed(1), x2 = f.sx(finite(r[2]) ? r[2] : r[0]).toFixed(1);
        if (!r[3]) { bad += "M" + x0 + " " + y + "H" + x2 + (x2 === x0 ? "h1" : ""); return; }
        if (!r[4]) { warm += "M" + x0 + " " + y + "H" + x2; return; }
        var x1 = f.sx(finite(r[1]) ? r[1] : r[0]).toFixed(1);
        wait += "M" + x0 + " " + y + "H" + x1; dec += "M" + x1 + " " + y + "H" + x2;
      });
      el("path", { d: wait, stroke: "#f5b041", "stroke-width": 1.2 }, svg);
      el("path", { d: dec, stroke: color, "stroke-width": 1.2 }, svg);
      el("path", { d: warm, stroke: "#98a2b3", "stroke-width": 1.2 }, svg);
      el("path", { d: bad, stroke: "#c0392b", "stroke-width": 1.6 }, svg);
    }, tl.length > 0);
    var tt = (d.ttft || []).filter(function (q) { return finite(q[0]) && finite(q[1]); });
    mini(grid, "TTFT (s) over time", function (svg) {
      var f = frame(svg, domain(tt.map(function (q) { return q[0]; })), domain(tt.map(function (q) { return q[1]; }), true));
      var path = tt.map(function (q) { return "M" + f.sx(q[0]).toFixed(1) + " " + f.sy(q[1]).toFixed(1) + "h0.01"; }).join("");
      el("path", { d: path, stroke: color, "stroke-width": 3, "stroke-linecap": "round" }, svg);
    }, tt.length > 0);
    line(grid, "Output throughput over time (tok/s)", d.throughput, color);
    line(grid, "Requests in flight", d.inflight, "#475467");
    line(grid, "GPU KV-cache usage (server" + (finite(d.kv_pool_tokens) ? "; pool of " +
      Math.round(d.kv_pool_tokens).toLocaleString("en-US") + " tokens" : "") + ")", d.kv_usage, "#8e44ad", pct);
    line(grid, "Prefix-cache hit rate (server)", d.cache_hit, "#16a085", pct);
  }
  function kv(parent, obj) {
    var box = el("div", { "class": "kv" }, parent);
    Object.keys(obj || {}).forEach(function (k) {
      var v = obj[k];
      if (v === null || v === undefined || v === "") return;
      el("div", null, box, k);
      el("div", null, box, typeof v === "object" ? JSON.stringify(v) : when(k, v) || String(v));
    });
    return box;
  }
  /* A provenance time (`started_at`, `finished_at`: Unix seconds) read as a UTC date, the raw number beside it. */
  function when(k, v) {
    if (!/_at$/.test(k) || !finite(v) || v < 1e8) return null;
    return new Date(v * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") + " (Unix " + v + " s)";
  }
  function openDrill(id) {
    var p = pointById[id], d = D.details[id] || {}, s = seriesByKey[p.series], box = document.getElementById("drilldown");
    state.selected = id; writeHash();
    clear(box);
    box.style.display = "block";
    box.setAttribute("data-id", id);
    var close = el("button", { "class": "close", type: "button" }, box, "close");
    close.addEventListener("click", function () { box.style.display = "none"; state.selected = null; writeHash(); renderChart(); });
    el("h2", null, box, pointLabel(p));
    var badges = el("div", null, box);
    el("span", { "class": "badge " + p.verdict }, badges, p.verdict + (warned(p) ? " " + WARN : ""));
    badges.appendChild(document.createTextNode(" "));
    el("span", { "class": "badge src" }, badges, "source: " + p.source);
    if (p.reused) { badges.appendChild(document.createTextNode(" ")); el("span", { "class": "badge reused", id: "reused-badge" }, badges, reusedText(p)); }
    badges.appendChild(document.createTextNode(" job " + p.job_id + " · result " + p.id + " · " + p.served_on + " · " +
      measuredText(p, d) + (onFrontier(p) ? " · on the " + axisByKey[state.x].label + " frontier" : "")));
    if (p.repeats) el("p", { id: "repeats-note" }, box, repeatsText(p) + " (jobs " + p.repeats.job_ids.join(", ") +
      "); the timeline and provenance below are those of result " + p.id + ".");
    var v = d.validity || {};
    // a point that is the mean of its repeats: each repeat's reasons (the validity below is its first repeat's alone)
    var reasons = (p.repeats ? p.reasons : v.reasons || p.reasons) || [], warnings = (p.warnings || []).concat(v.warnings || []);
    if (reasons.length || warnings.length) {
      var ul = el("ul", { id: "validity-reasons" }, box);
      reasons.forEach(function (r) { el("li", null, ul, r); });
      warnings.forEach(function (r) { el("li", null, ul, "warning: " + r); });
    }
    drillCharts(box, d, s.color);
    var two = el("div", { "class": "two" }, box), left = el("div", null, two), right = el("div", null, two);
    el("h3", null, left, "Metrics");
    var mt = el("table", null, left);
    D.metrics.forEach(function (m) { var tr = el("tr", null, mt); el("td", null, tr, m.label); el("td", { "class": "num", "data-key": m.key }, tr, fmt(tableValue(p.metrics[m.key], m.unit), tableUnit(m.unit)) + modelled(p, m.key) + priced(p, m)); });
    el("h3", null, right, "Server command");
    el("pre", { id: "server-command" }, right, d.server_command || "(server_command.txt not found)");
    el("h3", null, right, "Provenance");
    kv(right, d.provenance);
    el("h3", null, right, "Identity");
    kv(right, p.identity);
    var ch = d.client_health || {};
    if (ch.schedule_lag_s || ch.saturated !== undefined) {
      el("h3", null, right, "Client health");
      kv(right, { saturated: ch.saturated, reasons: (ch.saturation_reasons || []).join("; "), "schedule lag p99 (s)": ch.schedule_lag_s ? ch.schedule_lag_s.p99 : null });
    }
    renderChart();
    box.scrollIntoView({ block: "nearest" });
  }

  /* ---------------------------------------------------------------- URL state */
  function writeHash() {
    var h = "x=" + encodeURIComponent(state.x) + "&y=" + encodeURIComponent(state.y) + (state.selected ? "&p=" + encodeURIComponent(state.selected) : "");
    if (window.history && window.history.replaceState) window.history.replaceState(null, "", "#" + h);
  }
  function readHash() {
    var out = {};
    (window.location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("="); if (i > 0) out[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1));
    });
    if (out.x && axisByKey[out.x]) state.x = out.x;
    if (out.y && yByKey[out.y]) state.y = out.y;
    return out;
  }

  function renderEvals() {
    var rows = D.evals || [], t = document.getElementById("evals-table");
    if (!t) return;
    document.getElementById("evals").hidden = !rows.length;
    clear(t);
    var cols = [["job_id", "job"], ["series", "series"], ["mode", "mode"], ["task", "task"], ["score", "score"],
      ["score_stderr", "± stderr"], ["n_samples", "samples"], ["eval_concs", "eval conc"], ["verdict", "verdict"],
      ["reason", "reason"], ["acceptance_length", "AL read back"], ["harness", "harness"]];
    var head = el("tr", null, el("thead", null, t)), body = el("tbody", null, t);
    cols.forEach(function (c) { el("th", { "data-col": c[0] }, head, c[1]); });
    rows.forEach(function (r) {
      var tr = el("tr", { "class": r.verdict + (r.verdict === "valid" ? "" : " invalid"), "data-id": r.id, title: r.command }, body);
      cols.forEach(function (c) {
        var v = c[0] === "reason" ? r.reasons.join("; ") : c[0] === "eval_concs" ? r.eval_concs.join(" ") : r[c[0]];
        // what the server's /metrics said over the eval: a real engine's realised AL, the simulator's modelled one
        if (c[0] === "acceptance_length" && typeof v === "number" && r.source !== "measured") v = fmt(v, null) + " (" + r.source + ")";
        var count = c[0] === "n_samples";  // a count, shown whole (it read 4.00)
        el("td", { "data-col": c[0], "class": typeof v === "number" ? "num" : null }, tr, typeof v === "number" ? (count ? String(v) : c[0] === "score" || c[0] === "score_stderr" ? fmt(v, "") : fmt(v, null)) : v === null || v === undefined ? "–" : String(v));
      });
    });
  }

  function renderAll() { renderLegend(); renderChart(); renderTable(); renderEvals(); }
  if (!D.points.length) document.body.classList.add("no-points");
  var h = readHash();
  renderHeader(); renderControls(); renderAll();
  if (h.p && pointById[h.p]) openDrill(h.p);
  document.body.setAttribute("data-ready", "1");
})();
