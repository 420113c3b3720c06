"""Agentic KV-offload DRAM budget (`total-cpu-dram-gb`), exactly as InferenceX computes it (spec §2.4).

Decimal arithmetic with the utilisation parsed from its decimal string, a 3 TB decimal cap on the node's DRAM, and
the node share of the GPUs in use: the whole single-node topology, or one prefill replica's per-node footprint for
multinode arms (only prefill offloads today).
"""

from __future__ import annotations

from decimal import Decimal

from llmsweep.catalog.fleet import FleetCatalog
from llmsweep.errors import ConfigError
from llmsweep.words import count_of

BYTES_PER_MIB = 1024 * 1024
BYTES_PER_GB = 1_000_000_000
MAX_AVAILABLE_CPU_DRAM_MIB = 2_861_022
"""3 TB decimal cap (3e12 B / 2^20), applied before the utilisation."""


def _hardware_field(fleet: FleetCatalog, runner: str, field: str) -> int:
    facts = fleet.hardware_of(runner)
    if facts is None:
        available = ", ".join(sorted(fleet.hardware))
        raise ConfigError(
            f"Runner '{runner}' requires '{field}' in runner hardware metadata. Available hardware keys: {available}",
            fix=f"add `hardware: {runner}: {{available-cpu-dram-mib: ..., gpus-per-node: ...}}` to the runner file",
        )
    return facts.available_cpu_dram_mib if field == "available-cpu-dram-mib" else facts.gpus_per_node


def replica_gpus_on_node(tp: int, pp: int, pcp: int, gpus_per_node: int) -> int:
    """GPUs one worker replica occupies on a node; replicas must tile nodes exactly."""
    per_replica = tp * pp * pcp
    if per_replica > gpus_per_node:
        if per_replica % gpus_per_node != 0:
            raise ConfigError(
                f"worker tp*pp*pcp-size={per_replica} spans multiple nodes but is not a multiple of "
                f"gpus-per-node={gpus_per_node}",
                fix="choose a prefill topology that fills whole nodes",
            )
        return gpus_per_node
    if gpus_per_node % per_replica != 0:
        raise ConfigError(
            f"worker tp*pp*pcp-size={per_replica} does not divide gpus-per-node={gpus_per_node} evenly",
            fix="choose a prefill topology whose replicas tile a node",
        )
    return per_replica


def total_cpu_dram_gb(
    fleet: FleetCatalog,
    runner: str,
    dram_utilization: float | None,
    kv_offloading: str,
    *,
    single_node_gpus: tuple[int, int, int] | None = None,
    prefill_gpus: tuple[int, int, int] | None = None,
) -> int:
    """Decimal GB of host DRAM the arm may offload KV into; 0 unless `kv_offloading == "dram"`.

    `single_node_gpus` is (tp, pp, pcp) of a single-node arm; `prefill_gpus` the same for a multinode prefill worker.
    """
    if kv_offloading != "dram":
        return 0
    available = min(_hardware_field(fleet, runner, "available-cpu-dram-mib"), MAX_AVAILABLE_CPU_DRAM_MIB)
    utilization = Decimal(str(dram_utilization))
    gpus_per_node = _hardware_field(fleet, runner, "gpus-per-node")
    if prefill_gpus is not None:
        gpu_count = replica_gpus_on_node(*prefill_gpus, gpus_per_node)
    else:
        assert single_node_gpus is not None
        tp, pp, pcp = single_node_gpus
        gpu_count = tp * pp * pcp
        if gpu_count > gpus_per_node:
            raise ConfigError(
                f"tp={tp} with pp={pp} and pcp-size={pcp} requires {count_of(gpu_count, 'GPU')} and exceeds "
                f"gpus-per-node={gpus_per_node} for runner '{runner}'",
                fix="KV-offload arms must fit one node: lower tp/pp/pcp-size",
            )
    proportional = Decimal(available) * BYTES_PER_MIB * utilization * gpu_count / gpus_per_node
    return int(proportional / BYTES_PER_GB)
