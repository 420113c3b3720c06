"""A DP-attention launch's running-request cap as each engine counts it: the one home of that count, of the refusal
of a cap that leaves a rank no request, and of the launch note that says it (the real engines' adapters and the
simulator's stand-in both read it)."""

from __future__ import annotations

from dataclasses import dataclass

from llmsweep.catalog.engines import get_engine
from llmsweep.engine_ids import SGLANG
from llmsweep.errors import ConfigError

SPLIT_OVER_DP_RANKS: frozenset[str] = frozenset({SGLANG.id})
"""Engines whose running-request cap is the server's total, divided among its DP-attention ranks: SGLang's
`--max-running-requests` (each rank's request pool is max_running_requests // attn_dp_size, read in the 0.5.16 wheel;
a cap below the ranks leaves each none). Every other engine's DP rank takes the cap itself: vLLM's
`--max-num-seqs` is each data-parallel engine core's, ATOM's and TensorRT-LLM's each rank's."""


@dataclass(frozen=True, slots=True)
class DpRunningCap:
    """How a launch's running-request cap `launched` (in `flag`) is counted over its `dp` DP-attention ranks."""

    engine: str
    """The engine id (`engine_ids`)."""
    flag: str
    launched: int
    dp: int
    per_rank: int
    """The requests one rank runs at most."""

    @property
    def split(self) -> bool:
        """The cap is the server's total, divided among the ranks (:data:`SPLIT_OVER_DP_RANKS`)."""
        return self.engine in SPLIT_OVER_DP_RANKS

    @property
    def total(self) -> int:
        """The requests the whole server runs at most: the ranks' together."""
        return self.dp * self.per_rank

    def note(self, origin: str) -> str:
        """The launch note: the cap as written (`origin` says who set it), and what the server and a rank admit."""
        name = get_engine(self.engine).display_name
        head = f"{self.flag} {self.launched} ({origin})"
        if self.split:
            return (f"{head} is the server's total: {name} gives each of its {self.dp} DP-attention ranks "
                    f"{self.launched} // {self.dp} = {self.per_rank} (a rank's request pool is the cap // the DP "
                    f"size), so the server runs at most {self.total} requests")
        return (f"{head} is per DP rank: {name} schedules each of its {self.dp} DP-attention ranks on its own, so the "
                f"server admits up to {self.total} running requests and any one rank {self.per_rank}, however the "
                "router spreads sessions")


def dp_running_cap(engine: str, flag: str, launched: int, dp: int) -> DpRunningCap:
    """The running-request cap `launched` (the value of `flag` in the launch) of an `engine` launch over `dp`
    DP-attention ranks. Raises ConfigError where the engine divides the cap among its ranks
    (:data:`SPLIT_OVER_DP_RANKS`) and it is below `dp`: each rank would take none and admit no request."""
    if engine in SPLIT_OVER_DP_RANKS:
        if launched < dp:
            raise ConfigError(f"{get_engine(engine).display_name} gives each of its {dp} DP-attention ranks {flag} "
                              f"{launched} // {dp} = 0 requests: no rank would admit one",
                              fix=f"set a cap of at least {dp} (agentic, where llmsweep sets 2 x conc: a concurrency "
                                  f"of {-(-dp // 2)} or more), or run without DP attention")
        from llmsweep.sim.engine import sglang_pinned_cap

        return DpRunningCap(engine, flag, launched, dp, sglang_pinned_cap(launched, dp) // dp)
    return DpRunningCap(engine, flag, launched, dp, launched)
