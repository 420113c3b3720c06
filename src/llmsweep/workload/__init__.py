"""What the client sends: fixed-length prompt synthesis and agentic trace replay, as lane programs.

See `llmsweep.workload.base` for the contract shared by the load generator (wall-clock interpreter) and the
simulator's predictor (virtual-time interpreter).
"""
