"""The built-in simulated serving engine.

- `core` — a pure, clock-injected step machine (queues, token budget, KV blocks, prefix cache, preemption, spec)
- `perf` — step time from a roofline over hardware and model, with calibratable efficiencies
- `engine` — `EngineConfig`, the one envelope the CLI, server and predictor share, and `build_core`
- `server` — the live OpenAI-compatible aiohttp front (`llmsweep sim serve`)
- `predict` — virtual-time interpretation of workload lane programs (no HTTP, no asyncio)
- `calibrate` — fit the roofline's efficiency factors to measured runs (run-level replay fit, per-record fit)
- `calibration` — stored calibrations keyed by (engine, hardware, model class, precision, TP, KV dtype), applied by
  `EngineConfig`

Submodules are imported on use so `llmsweep --help` stays fast.
"""
