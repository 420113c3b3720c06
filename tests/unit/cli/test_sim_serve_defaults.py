"""`llmsweep sim serve` run with no option serves the simulated engine's own defaults (`sim.engine.EngineConfig`).

Its options used to restate each default as a literal (0.88 of HBM, 256 running requests, 8192-token chunks, h200,
50/10 ms constant steps, ...): a default changed in the engine's model would have left `sim serve` on the old one.
The options now take their defaults from the model's fields; this holds the two together, field by field.
"""

from __future__ import annotations

from typing import Any

import click
import pytest

from llmsweep.cli.sim import serve
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.serve_args import engine_config


def _defaults() -> dict[str, Any]:
    ctx = click.Context(serve)
    return {p.name: p.get_default(ctx) for p in serve.params if p.name is not None}


def test_sim_serve_with_no_option_is_the_engine_s_own_default_config() -> None:
    built = engine_config(_defaults())
    own = EngineConfig(calibrated=True)
    assert built == own, {k: (getattr(built, k), getattr(own, k)) for k in EngineConfig.model_fields
                          if getattr(built, k) != getattr(own, k)}


@pytest.mark.parametrize("field", ["model", "hardware", "tp", "ep", "precision", "kv_dtype", "mem_fraction_static",
                                   "max_running_requests", "chunked_prefill_size", "dram_gb", "kv_capacity_tokens",
                                   "context_length", "timing", "seed", "scheduler",
                                   "max_prefill_tokens"])
def test_each_engine_option_shows_the_field_s_default(field: str) -> None:
    """`--help` shows the default the engine takes (show_default reads the option's default)."""
    assert _defaults()[field] == EngineConfig.model_fields[field].default


def test_constant_step_options_are_the_model_s_seconds_in_ms() -> None:
    d = _defaults()
    assert (d["ttft_ms"] / 1e3, d["itl_ms"] / 1e3) == (EngineConfig.model_fields["ttft_s"].default,
                                                       EngineConfig.model_fields["itl_s"].default)


def test_the_shared_options_sim_serve_declares_below_the_cli_are_their_concepts() -> None:
    """`sim serve`'s options live with the simulator (`sim.serve_args`, below the CLI, which cannot read the CLI's
    concept table): each one other commands take too is its concept's option — its spelling, its parameter name, its
    old spellings — as if the CLI had declared it."""
    from llmsweep.cli.options import CONCEPTS, Opt

    shared = [p for p in serve.params if isinstance(p, Opt) and p.concept is not None]
    assert {p.concept for p in shared} >= {"model", "bind_host", "spec_method", "spec_k", "seed", "kv_transfer"}
    for p in shared:
        concept = CONCEPTS[p.concept]  # type: ignore[index]
        assert (p.opts[0], p.name) == (concept.spelling, concept.dest), p.concept
        assert set(concept.deprecated) <= set(p.old_spellings), p.concept
        # where the concept fixes a default, `sim serve`'s copy of it is that one (the two declarations cannot drift:
        # `sim router` and `router` bind 127.0.0.1 by the concept, `sim serve` by its own declaration)
        if "default" in concept.settings:
            assert p.default == concept.settings["default"], p.concept


def test_sim_serve_and_the_launch_parser_are_one_declaration() -> None:
    """What `sim serve` takes is what the parser `execute.virtual` reads a launch with takes: same options, same
    defaults (`sim.serve_args.serve_options` declares both)."""
    from llmsweep.sim.serve_args import _parser

    def table(command: click.Command) -> dict[str | None, tuple[object, ...]]:
        ctx = click.Context(command)
        return {p.name: (tuple(p.opts), tuple(p.secondary_opts), p.get_default(ctx), repr(p.type))
                for p in command.params}

    assert table(serve) == table(_parser())
