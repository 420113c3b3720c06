"""`llmsweep catalog …` and `llmsweep al …`: show what the catalogs know, and look up a golden acceptance length.

Thin by design: every answer comes from `llmsweep.catalog`; this module only parses arguments and prints rich tables
for people or JSON (`--json`) for programs. Exit 0 on success, 2 on an invalid argument (unknown model, curve,
method), with the message on stderr.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from llmsweep.catalog import engines as engines_mod
from llmsweep.catalog import fleet as fleet_mod
from llmsweep.catalog import golden as golden_mod
from llmsweep.catalog import hardware as hardware_mod
from llmsweep.catalog import images as images_mod
from llmsweep.catalog import models as models_mod
from llmsweep.catalog.sources import ENV_VAR, catalog_dirs
from llmsweep.cli.options import DefaultCommandGroup, PathValue, json_group_option, json_option, option
from llmsweep.cli.tables import Column, fit_tables, plain, table_console
from llmsweep.engine_ids import acceptance_spellings
from llmsweep.errors import ConfigError

SECTIONS = ("hardware", "models", "engines", "images", "golden", "fleet")


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


_NUMBER = re.compile(r"^(—|[-+]?[\d.,]+\*?)$")
"""A catalog cell that is a figure (`85.52`, `7.67*` an estimate, `—` none): its column is never wrapped or cut."""


def _table(title: str, columns: Iterable[str], rows: Iterable[Iterable[Any]],
           caption: str | None = None) -> list[Table]:
    """A catalog table laid out for the terminal as every table is (`cli.tables.fit_tables`): the first column names
    the row, a column of figures is as wide as its widest figure, text wraps, and the columns that do not fit go into a
    continuation table (rich had folded `85.52` GB into `85.5` over `2` in an 80-column terminal)."""
    headers = list(columns)
    cells = [[_fmt(v) for v in row] for row in rows]
    cols = []
    for i, header in enumerate(headers):
        if i == 0:
            cols.append(Column(header, kind="key", justify="left"))
        elif cells and all(_NUMBER.match(row[i]) for row in cells):
            cols.append(Column(header))
        else:  # wraps at its spaces; a word up to 24 characters (a prefix, a variant) is kept whole
            longest = max((len(word) for row in cells for word in row[i].split()), default=1)
            cols.append(Column(header, kind="text", justify="left", min_width=min(24, max(8, longest))))
    return fit_tables(plain(title), cols, [[plain(c) for c in row] for row in cells], width=table_console().width,
                      caption=plain(caption) if caption else None)


def _mark(value: Any, estimated: bool) -> str:
    text = _fmt(value)
    return f"{text}*" if estimated else text


# ------------------------------------------------------------------------------------------------------- sections


def _hardware_data() -> list[dict[str, Any]]:
    return [h.model_dump(mode="json") for h in hardware_mod.all_hardware()]


def _hardware_table() -> list[Table]:
    rows = []
    for h in hardware_mod.all_hardware():
        e = h.is_estimate
        rows.append([
            h.id, h.vendor, h.arch, h.platform, _mark(h.hbm_gb, e("hbm_gb")), _mark(h.hbm_tbps, e("hbm_tbps")),
            _mark(h.bf16_tflops, e("bf16_tflops")), _mark(h.fp8_tflops, e("fp8_tflops")),
            _mark(h.fp4_tflops, e("fp4_tflops")), _mark(h.scaleup_gbps, e("scaleup_gbps")), h.gpus_per_node,
        ])
    return _table(
        "Hardware (dense peaks per GPU)",
        ["sku", "vendor", "arch", "platform", "HBM GB", "TB/s", "bf16 TF", "fp8 TF", "fp4 TF", "scale-up GB/s",
         "GPUs/node"],
        rows,
        caption="* estimate (see --json for notes and sources)",
    )


def _models_data() -> list[dict[str, Any]]:
    out = []
    for m in models_mod.all_models():
        data = m.model_dump(mode="json", by_alias=True)
        data["context_class"] = m.context_class
        data["kv_bytes_per_token"] = {d: m.kv_bytes_per_token(d) for d in ("bf16", "fp8")}
        out.append(data)
    return out


def _models_table() -> list[Table]:
    rows = []
    for m in models_mod.all_models():
        e = m.is_estimate
        attn = "MLA" if m.attention.kind == "mla" else f"GQA {m.attention.heads}/{m.attention.kv_heads}"
        if m.is_hybrid:
            attn += f" + {m.linear_attention.layers} linear"  # type: ignore[union-attr]
        moe = f"{m.moe.experts}e top{m.moe.top_k}" if m.moe else "dense"
        rows.append([
            m.id, m.prefix, _mark(m.total_params_b, e("total_params_b")),
            _mark(m.active_params_b, e("active_params_b")),
            _mark(m.layers, e("layers")), _mark(attn, e("attention")), _mark(moe, e("moe")),
            _mark(m.kv_bytes_per_token("bf16"), e("attention") or e("layers")), m.context_class,
            ",".join(m.draft_methods) or "—",
        ])
    return _table(
        "Models",
        ["id", "prefix", "params B", "active B", "layers", "attention", "MoE", "KV B/token bf16", "ctx class",
         "drafts"],
        rows,
        caption="* estimate (see --json for notes and sources)",
    )


def _engines_data() -> dict[str, Any]:
    return {
        "engines": [e.model_dump(mode="json") for e in engines_mod.all_engines()],
        "gates": [g.model_dump(mode="json") for g in engines_mod.feature_gates()],
        "incompatibilities": [i.model_dump(mode="json") for i in engines_mod.all_incompatibilities()],
    }


def _engines_tables() -> list[Table]:
    engines = _table(
        "Engines",
        ["engine", "frameworks", "port", "health", "metrics", "prefix", "known versions"],
        [[e.id, ", ".join(e.frameworks), e.default_port, e.health_path, e.metrics_path, e.metric_prefix,
          ", ".join(str(v) for v in e.known_versions) or "—"] for e in engines_mod.all_engines()],
    )
    gates = _table(
        "Feature gates",
        ["engine", "kind", "knob", "versions", "outside range"],
        [[g.engine, g.kind, g.name + (f"={g.value}" if g.value else ""),
          g.range_text() + (" (est.)" if g.estimate else ""), g.below] for g in engines_mod.feature_gates()],
    )
    incompat = _table(
        "Known incompatibilities",
        ["id", "engine", "versions", "platforms", "models", "severity", "fix"],
        [[i.id, i.engine, f"{i.min_version or ''}..{i.max_version or ''}", ",".join(i.platforms or ["any"]),
          ",".join(i.model_families or ["any"]), i.severity, i.fix] for i in engines_mod.all_incompatibilities()],
    )
    return [*engines, *gates, *incompat]


def _images_data() -> dict[str, Any]:
    rules = images_mod.python_rules()
    return {"python": [r.model_dump(mode="json") for r in rules]}


def _images_table() -> list[Table]:
    return _table(
        "Python shipped by engine images",
        ["repository", "tag pattern", "python", "path", "estimate", "evidence"],
        [[r.repository, r.tag_pattern, r.python, r.path, "yes" if r.estimate else "no", r.evidence]
         for r in images_mod.python_rules()],
        caption="`llmsweep catalog image REF` parses one reference",
    )


def _golden_data() -> list[dict[str, Any]]:
    return [c.model_dump(mode="json") for c in golden_mod.list_curves()]


def _golden_table() -> list[Table]:
    rows = []
    for c in golden_mod.list_curves():
        for mode in c.modes:
            values = c.values[mode]  # type: ignore[index]
            rows.append([c.id, c.model_prefix, c.method, c.variant, c.checkpoint, c.precision_measured, mode,
                         " ".join(f"{k}:{values[k]:.2f}" for k in sorted(values))])
    return _table("Golden acceptance lengths (K: AL)",
                  ["curve", "prefix", "method", "variant", "checkpoint", "precision", "thinking", "K: AL"], rows)


def _fleet_data() -> dict[str, Any]:
    return fleet_mod.default_fleet().model_dump(mode="json", by_alias=True)


def _fleet_table() -> list[Table]:
    fleet = fleet_mod.default_fleet()
    rows = []
    for label, nodes in fleet.labels.items():
        facts = fleet.hardware_of(label)
        spec = hardware_mod.hardware_for_runner(label)
        rows.append([label, spec.id if spec else None, len(nodes), fleet.gpus_per_node(label),
                     facts.available_cpu_dram_mib if facts else None])
    return _table("Fleet (runner labels)", ["label", "sku", "nodes", "GPUs/node", "CPU DRAM MiB"], rows)


_DATA: dict[str, Callable[[], Any]] = {
    "hardware": _hardware_data,
    "models": _models_data,
    "engines": _engines_data,
    "images": _images_data,
    "golden": _golden_data,
    "fleet": _fleet_data,
}


def _show(section: str, as_json: bool) -> None:
    if as_json:
        _emit_json(_DATA[section]())
        return
    console = table_console()
    builders: dict[str, Callable[[], list[Table]]] = {
        "hardware": _hardware_table,
        "models": _models_table,
        "engines": _engines_tables,
        "images": _images_table,
        "golden": _golden_table,
        "fleet": _fleet_table,
    }
    tables = builders[section]()
    for table in tables:
        console.print(table)


# ------------------------------------------------------------------------------------------------------- commands

@click.group(invoke_without_command=True)
@json_option()
@click.pass_context
def catalog(ctx: click.Context, as_json: bool) -> None:
    """Show the hardware, fleet, model, engine, image and golden-AL catalogs.

    Data comes from the packaged YAML files, extended or overridden by files of the same name in the directories
    named by LLMSWEEP_CATALOG_DIR.
    """
    if ctx.invoked_subcommand is not None:
        return
    counts = {
        "hardware": len(hardware_mod.all_hardware()),
        "models": len(models_mod.all_models()),
        "engines": len(engines_mod.all_engines()),
        "gates": len(engines_mod.feature_gates()),
        "incompatibilities": len(engines_mod.all_incompatibilities()),
        "images": len(_DATA["images"]()["python"]),
        "golden": len(golden_mod.list_curves()),
        "fleet": len(_DATA["fleet"]()["labels"]),
    }
    dirs = [str(d) for d in catalog_dirs()]
    if as_json:
        _emit_json({"counts": counts, "catalog_dirs": dirs, "env_var": ENV_VAR})
        return
    # one row per section command (feature gates and incompatibilities are shown by `catalog engines`)
    entries = {**{section: str(counts[section]) for section in SECTIONS},
               "engines": f"{counts['engines']} engines, {counts['gates']} feature gates, "
                          f"{counts['incompatibilities']} incompatibilities",
               "images": f"{counts['images']} images with a known Python",
               "fleet": f"{counts['fleet']} runner labels"}
    console = table_console()
    for table in _table("Catalogs", ["section", "entries", "show it"],
                        [(section, entries[section], f"llmsweep catalog {section}") for section in SECTIONS]):
        console.print(table)
    click.echo(f"sources, later ones win: {', '.join(dirs)} (set {ENV_VAR} to add your own)")
    click.echo("show one: llmsweep catalog " + "|".join(SECTIONS) + " [--json]; llmsweep catalog image REF")


def _section_command(section: str, help_text: str) -> click.Command:
    @click.command(name=section, help=help_text)
    @json_option()
    def command(as_json: bool) -> None:
        _show(section, as_json)

    return command


for _name, _help in (
    ("hardware", "Accelerator SKUs: memory, bandwidth, dense TFLOP/s, interconnect, GPUs per node."),
    ("models", "Models: prefixes, HF ids, shape, KV bytes per token, context class, draft methods."),
    ("engines", "Engines: endpoints, readiness markers, feature gates by version, known incompatibilities."),
    ("images", "What engine images ship (Python version table)."),
    ("golden", "Golden acceptance-length curves with their provenance."),
    ("fleet", "Runner labels, their nodes and host facts (the fleet catalog)."),
):
    catalog.add_command(_section_command(_name, _help))


@catalog.command(name="image")
@click.argument("ref")
@json_option()
def image(ref: str, as_json: bool) -> None:
    """Parse one image reference: registry, repository, tag, engine version, platform, GPU family, Python."""
    try:
        parsed = images_mod.parse_image(ref)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="REF") from None
    data = parsed.model_dump(mode="json")
    if as_json:
        _emit_json(data)
        return
    rows = [(k, v) for k, v in data.items() if k != "warnings"]
    for table in _table(f"Image {ref}", ["field", "value"], rows):
        table_console().print(table)
    for warning in parsed.warnings:
        click.echo(f"warning: {warning}", err=True)


# ------------------------------------------------------------------------------------------------------- al


def _known_curves_text(curves: Iterable[golden_mod.GoldenCurve]) -> str:
    return "; ".join(
        f"{c.id} ({c.model_prefix}/{c.method}{'/' + c.variant if c.variant else ''}: "
        f"{', '.join(m.removeprefix('thinking_') for m in c.modes)}, K {min(c.ks)}-{max(c.ks)})"
        for c in curves
    )


LOOKUP = "lookup"


# `llmsweep al MODEL …` looks a value up; `llmsweep al collect …` measures a curve. The lookup is the group's default
# subcommand (listed, so that the help it points to is there), so every existing spelling of the lookup keeps working.
@click.group(name="al", cls=DefaultCommandGroup, default_command=LOOKUP, invoke_without_command=False,
             help="Golden acceptance lengths: `llmsweep al MODEL -m METHOD -k K` looks one up (with its "
             "provenance; short for `llmsweep al lookup MODEL …`, whose options `llmsweep al lookup --help` lists); "
             "`llmsweep al collect RECIPE` measures a curve on a served model.")
@json_group_option()
def al() -> None:
    pass


@al.command(name=LOOKUP)
@click.argument("model")
@option("spec_method", dest="method", short="-m", deprecated=("--method",), required=True,
        help="Draft method: mtp (also eagle, nextn), eagle3, dspark.")
@option("spec_k", dest="k", short="-k", deprecated=("--k",), required=True)
@click.option("--thinking", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="Thinking mode of the curve.")
@option("draft_model", help="Draft heads (HF id), variant (eagle3-gqa) or curve id.")
@click.option("--precision", default=None,
              help="Precision the recipe serves (fp8, fp4…); default: what MODEL's id says. A format MODEL's id "
              "names (-MXFP4, -NVFP4, -FP8) is what is served, whatever this says. A curve measured in it wins "
              "over the default curve; warns on a mismatch.")
@click.option("--curves", "curve_dirs", multiple=True, type=PathValue(exists=True, file_okay=False, path_type=Path),
              help=f"A directory of curve files you collected (`llmsweep al collect`), read next to the packaged ones "
              f"(repeat for several; also ${golden_mod.CURVES_ENV_VAR}).")
@json_option()
def lookup(model: str, method: str, k: int, thinking: str, draft_model: str | None, precision: str | None,
           curve_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Look up the golden acceptance length for MODEL (HF id, model id or prefix) and print its provenance (the
    default command: `llmsweep al MODEL …` is `llmsweep al lookup MODEL …`)."""
    curves = golden_mod.list_curves(curve_dirs)  # (a --curves folder that is not one is refused as parsed)
    if golden_mod.normalise_method(method) is None:
        methods = ", ".join(sorted(golden_mod.METHOD_ALIASES))
        raise click.BadParameter(f"unknown draft method {method!r}; known spellings: {methods}",
                                 param_hint="--spec-method")
    spec = models_mod.find_model(model)
    raw = model.strip().lower()  # a curve keyed by a recipe's own model-prefix is found by that name
    prefix = raw if any(c.model_prefix == raw for c in curves) or spec is None else spec.prefix
    family = [c for c in curves if c.model_prefix == prefix]
    if not family:
        raise click.BadParameter(
            f"no golden curve for model {model!r} (prefix {prefix!r}); curves exist for: {_known_curves_text(curves)}",
            param_hint="MODEL",
        )
    if precision is None and spec is not None and "/" in model:
        precision = spec.checkpoint_precision(model)
    res = golden_mod.resolve_acceptance(prefix, model, precision or "", method, thinking, k, draft_model=draft_model,
                                        curve_dirs=curve_dirs)
    if res is None:
        raise click.BadParameter(
            f"no golden AL for {prefix} method={method} thinking={thinking} K={k}"
            + (f" draft-model={draft_model}" if draft_model else "")
            + f"; curves for {prefix}: {_known_curves_text(family)}",
            param_hint="--spec-method/--spec-k/--thinking",  # the spellings --help shows (--method, --k: old)
        )
    mismatch = res.precision_mismatch()  # against the served format: MODEL's id names it, else --precision
    spellings = acceptance_spellings(res.value, k)
    if as_json:
        _emit_json({**res.model_dump(mode="json"), "precision_mismatch": mismatch, "engine_spellings": spellings})
        return
    click.echo(f"{res.value:.2f}")
    rows = [
        ("curve", res.curve), ("model prefix", res.model_prefix), ("method", res.method),
        ("draft model", res.draft_model or "native MTP head" if res.method == "mtp" else res.draft_model),
        ("thinking", res.thinking), ("K", res.k), ("checkpoint measured", res.checkpoint),
        ("precision measured", f"{res.precision_measured} (from {res.precision_basis})"),
        ("hardware / engine", f"{res.hardware} / {res.engine}"), ("dataset", res.dataset), ("source", res.source),
    ]
    unstated = [key for key in golden_mod.SAMPLING_KEYS if key not in res.sampling]
    # what a collection must match to stand in for the curve, sending no key it leaves unstated
    rows.append(("sampling", " ".join(f"{key} {value:g}" for key, value in res.sampling.items())
                 + (f"; {', '.join(unstated)} unstated (the server's default)" if unstated else "")))
    chosen = golden_mod.get_curve(res.curve, curve_dirs)
    if chosen is not None:
        rows.append(("file", f"{chosen.file}" + ("" if chosen.packaged else " (user curve)")))
        rows += [("note", note) for note in chosen.notes]
    if res.simulated:
        rows.append(("simulated", "yes: collected on llmsweep's simulator (a modelled AL, not a measurement)"))
    rows += [("left out", f"{name}: collected on llmsweep's simulator, a modelled AL never passes over a measured "
              "one") for name in res.simulated_left_out]
    if res.passed_over:
        rows.append(("chosen over", f"{res.passed_over} (the family's default, measured in another precision)"))
    rows += [(f"{engine} spelling", text) for engine, text in spellings.items()]
    for table in _table("Golden acceptance length", ["field", "value"], rows):
        table_console().print(table)
    if mismatch:
        click.echo(
            f"warning: curve measured on {res.precision_measured} ({res.checkpoint}) "
            f"but the recipe serves {res.served_precision}{res.served_precision_note(res.served_precision or '')}",
            err=True,
        )


def _collect() -> click.Command:
    from llmsweep.cli.alcollect import collect

    return collect


al.add_command(_collect())
