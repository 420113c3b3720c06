"""Where a simulated job may run: the one home of that decision and of its wording.

`llmsweep run` asks it per job (`execute.pipeline`, from the job's engine) and `llmsweep discover` up front (from
each recipe's engine, `spec.engines.resolve_engine`, the engine its jobs get), so both say the same thing for the same
reason. In virtual time a simulated job runs on the simulator core in this process: an executor other than local
would place no server (an `--executor slurm` run once said `executor: slurm` and touched no Slurm). Its live server
runs on the host, never from an image, so docker has nothing to start; the local and Slurm executors serve it, a
disaggregated job's roles included (each role a process of this host, or a step on its node: `execute.roles`).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsweep.option_spellings import flag as _flag

_EXECUTOR = _flag("executor")
_SIMULATE = _flag("simulate")
_LIVE = _flag("live")


@dataclass(frozen=True)
class PlacementRefusal:
    """Why a simulated job cannot run where `--executor` would place it, and what to do instead."""

    reason: str
    fix: str

    def line(self) -> str:
        """Reason and fix as one line (a refused job's reason)."""
        return f"{self.reason} ({self.fix})"


def places_roles(executor: str) -> bool:
    """Whether `executor` launches a disaggregated deployment role by role (each role a server of its own)."""
    from llmsweep.execute.local import LocalExecutor
    from llmsweep.execute.slurm import SlurmExecutor

    return executor in (LocalExecutor.kind, SlurmExecutor.kind)


def simulator_placement_refusal(*, engine: str | None, simulate: bool, executor: str, live: bool,
                                live_option: bool = True) -> PlacementRefusal | None:
    """Why a job of `engine` (under `simulate`) cannot run through `executor` (None: it can, or it is no simulated
    job). `live`: the simulator is asked to serve over HTTP in wall-clock time; `live_option`: the command offers
    --live (`discover` does not), so the fix may name it."""
    from llmsweep.engine_ids import SIM
    from llmsweep.engines import runs_on_simulator
    from llmsweep.execute.docker import DockerExecutor
    from llmsweep.execute.local import LocalExecutor

    if not runs_on_simulator(engine, simulate=simulate) or executor == LocalExecutor.kind:
        return None
    if not live:
        # --live helps only where the live simulator can be placed (role by role on the host or a node; never from
        # an image): the fix never names a flag that is refused in its turn
        ways = ([f"add {_LIVE} to serve the simulator through {executor} in wall-clock time"]
                if live_option and executor != DockerExecutor.kind else [])
        if simulate and engine != SIM.id:
            ways.append(f"drop {_SIMULATE} to run the recipe's engine through {executor}")
        ways.append(f"drop {_EXECUTOR}")
        return PlacementRefusal(f"a simulated job runs on the simulator core in virtual time, in this process: "
                                f"{_EXECUTOR} {executor} would place no server", fix=", or ".join(ways))
    if executor == DockerExecutor.kind:
        return PlacementRefusal(f"the simulator's server runs on the host, not from an image: {_EXECUTOR} docker has "
                                "no container to start for it", fix=f"use {_EXECUTOR} local, or slurm")
    return None
