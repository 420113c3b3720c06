"""Engine adapters: render a Job into the exact server launch (argv, env, port, health, metrics, readiness).

Adapters know nothing of executors: they produce a `LaunchSpec`; an executor decides where and how it runs.
"""
