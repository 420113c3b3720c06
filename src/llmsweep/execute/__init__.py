"""Executors: start a LaunchSpec's server locally, in Docker or under Slurm, know when it is ready, tear it down.

An executor (:class:`~llmsweep.execute.executor.Executor`, registered by kind in
:mod:`llmsweep.execute.registry`) places server groups and supplies two things to the executor-agnostic lifecycle
(`execute/lifecycle.py`):

- how to launch the server: a :class:`~llmsweep.execute.base.ServerLauncher` (`local`, `docker`, and on a Slurm node
  `srun`/pyxis) returning a :class:`~llmsweep.execute.handle.ServerHandle`;
- where the lifecycle runs: here (`local`, `docker`) or on an allocated node (`slurm`, which submits a batch job
  running the worker command; the worker picks its launcher with `node_launcher_from_env()`).

Submodules import nothing heavy; import them directly (`from llmsweep.execute.registry import get_executor`).
"""
