"""The executors llmsweep knows, by kind: `executor_kinds()` for the CLI, `get_executor(kind)` for `llmsweep run`.

Each executor module registers its class with `@register_executor` when imported; the import line below is the one
place a new executor module is added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from llmsweep.errors import ConfigError
from llmsweep.execute import docker, local, slurm  # noqa: F401 - importing an executor module registers it
from llmsweep.execute.executor import Executor, registered_executors


def executor_kinds() -> tuple[str, ...]:
    """Every registered executor kind, sorted."""
    return tuple(sorted(registered_executors()))


def executor_help() -> str:
    """`--executor` help: each kind with where it runs servers."""
    known = registered_executors()
    return "Where servers run: " + "; ".join(f"{kind}: {known[kind].summary}" for kind in executor_kinds())


def get_executor(kind: str, options: Mapping[str, Any] | BaseModel | None = None) -> Executor:
    """The executor of `kind` with its options validated; an unknown kind is a ConfigError listing the known ones."""
    cls = registered_executors().get(kind)
    if cls is None:
        raise ConfigError(f"unknown executor kind {kind!r}", fix=f"use one of {', '.join(executor_kinds())}")
    return cls(options)
