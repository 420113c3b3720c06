"""The spelling of each option of the simulated engine's command line, `llmsweep sim serve ...`, defined once.

`sim.serve_args` declares the options with these spellings (their types, defaults and help are its own), and the
adapter that renders a job into a `sim serve` launch (`engines.sim`) writes and reads the launch's options through
them: renaming an option here renames it in the declaration and in every launch, and nothing else is edited. A
spelling a real engine's flag shares (`--mem-fraction-static` is SGLang's too) is the simulator's here only where the
adapter means the simulator's option; the recipe's flags it translates are the engines' own.

Kept apart from `sim.serve_args` so that rendering a launch does not load what parsing one needs (click, the engine
model and its numpy): this module imports only `option_spellings`, whose concept spellings the options that other
commands take too keep (`tests/unit/test_option_spellings.py`), and `engine_ids`, both below every room: the pinned
acceptance length is the simulated engine's identity's spelling (`engine_ids.SIM_ACCEPTANCE_FLAG`, which its
`pin_acceptance` writes). `sim router` binds its port with `PORT` too (its other options are concepts).
`tests/unit/engines/test_sim_serve_flags.py` renders jobs and parses them back with `sim serve`'s own parser.
"""

from __future__ import annotations

from typing import Final

from llmsweep.engine_ids import SIM_ACCEPTANCE_FLAG
from llmsweep.option_spellings import flag

# the engine and its parallelism
MODEL: Final = flag("model")
HARDWARE: Final = "--hardware"
TP: Final = "--tp"
EP: Final = "--ep"
DP_ATTENTION: Final = "--dp-attention"
PRECISION: Final = "--precision"
KV_DTYPE: Final = "--kv-dtype"

# where it serves
HOST: Final = flag("bind_host")
PORT: Final = "--port"
SERVED_MODEL_NAME: Final = "--served-model-name"

# speculative decoding
SPEC_METHOD: Final = flag("spec_method")
SPEC_K: Final = flag("spec_k")
ACCEPTANCE_LENGTH: Final = SIM_ACCEPTANCE_FLAG

# memory, KV pool and CPU tier
KV_OFFLOAD: Final = "--kv-offload"
DRAM_GB: Final = "--dram-gb"
MEM_FRACTION_STATIC: Final = "--mem-fraction-static"
KV_CAPACITY_TOKENS: Final = "--kv-capacity-tokens"
MAX_TOTAL_TOKENS: Final = "--max-total-tokens"
PINNED_KV_TOKENS: Final = "--pinned-kv-tokens"
KV_CACHE_MEMORY_BYTES: Final = "--kv-cache-memory-bytes"
PREFIX_CACHING: Final = "--prefix-caching"
NO_PREFIX_CACHING: Final = "--no-prefix-caching"
VLLM_VERSION: Final = "--vllm-version"

# scheduling
MAX_RUNNING_REQUESTS: Final = "--max-running-requests"
CHUNKED_PREFILL_SIZE: Final = "--chunked-prefill-size"
MAX_PREFILL_TOKENS: Final = "--max-prefill-tokens"
PREFILL_BUDGET: Final = "--prefill-budget"
SCHEDULER: Final = "--scheduler"
CAPACITY: Final = "--capacity"
CONTEXT_LENGTH: Final = "--context-length"
MAX_PROMPT_TOKENS: Final = "--max-prompt-tokens"

# timing, calibration and whose engine it mimics
NO_CALIBRATION: Final = "--no-calibration"
TIMING: Final = "--timing"
TTFT_MS: Final = "--ttft-ms"
ITL_MS: Final = "--itl-ms"
SEED: Final = flag("seed")
METRICS_STYLE: Final = "--metrics-style"
ENGINE_STYLE: Final = "--engine-style"

# a disaggregated role
ROLE: Final = "--role"
KV_TRANSFER: Final = flag("kv_transfer")
KV_LINKS: Final = "--kv-links"
PREFILL_TP: Final = "--prefill-tp"
