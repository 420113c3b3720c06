"""Noise-aware discovery sweeps that propose a recipe's official concurrency grid (`llmsweep discover`).

- `analysis` — pure: run-to-run noise from repeats, the knee (throughput per GPU stops rising beyond noise), the KV/HBM
  cliff (the server's KV usage and preemptions), refinement targets, the proposed grid and why each point is in it;
- `recipe` — a recipe's arms, the stage recipes a discovery runs, the proposed recipe as a patch of the original;
- `sweep` — the loop: a repeated coarse ladder, bisection rounds around the knee, through `llmsweep run`'s pipeline;
- `model` — the typed results (`Discovery`), written as discovery.json.
"""
