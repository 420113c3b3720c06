"""What the client sends: fixed-length prompt synthesis and agentic trace replay, as lane programs.

See `llmsweep.workload.base` for the contract shared by the load generator (wall-clock interpreter) and the
simulator's predictor (virtual-time interpreter). Modules (import what you need; nothing is imported here so
`llmsweep --help` stays fast):

- `tokenizer`  — the `Tokenizer` protocol, the built-in `WordTokenizer` (`count_tokens`), the HF loader.
- `fixed`      — `FixedLengthWorkload(FixedLengthConfig)`: exact ISL/OSL, InferenceX conventions.
- `agentic`    — `AgenticWorkload(AgenticConfig)`: AgentX replay of Weka traces with subagents.
- `mooncake`   — `MooncakeWorkload(MooncakeConfig)`: open-loop replay of Mooncake timestamped traces.
- `blocks`     — hash-id blocks → deterministic text; the ideal prefix cache of a play.
- `conversation` — how a replayed stream lays its blocks out as chat messages.
- `traces`     — Weka schema, loader, synthetic generator, corpus statistics, replay plan.
- `scenario`   — the scenario registry: fixed-seq-len, agentic-coding, mooncake-replay, each owning its defaults,
                 stopping rule, workload builder and gate profile (`get_scenario`, `scenario_of`).
- `build`      — the workload configs of a job's `ResolvedWorkload` at one concurrency point.
"""
