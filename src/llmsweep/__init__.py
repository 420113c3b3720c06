"""llmsweep: trustworthy, comparable LLM-inference benchmarks.

Recipes as data, validated before the GPU, expanded into typed Jobs, launched on real engines or the built-in
simulator, measured by our own client, aggregated with the AgentX definitions and stored for comparison.
"""

from __future__ import annotations

__version__ = "0.1.0"
