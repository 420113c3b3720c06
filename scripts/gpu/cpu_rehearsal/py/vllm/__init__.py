"""CPU rehearsal stand-in for the vllm package (docs/gpu.md): `python3 -m vllm.entrypoints.openai.api_server`
serves llmsweep's simulator in vLLM style. Put scripts/gpu/cpu_rehearsal/py first on PYTHONPATH."""

__version__ = "0.26.0"
