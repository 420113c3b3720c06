"""The fleet: runner labels, their nodes, and host facts — InferenceX's `runners.yaml`, typed.

`labels` maps a scheduling label (`h200`, `mi355x-disagg`, `cluster:mi300x-amds`) to concrete node names
(`<cluster-prefix>_<n>`); `hardware` gives a label's host DRAM and GPUs per node, which size the agentic KV-offload
budget. The packaged copy of InferenceX's file is the default fleet; `--runner-config` points at another.
Validation keeps InferenceX's messages (spec §1.7) and adds the file:line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.errors import ConfigError, undecodable_line
from llmsweep.findings import Finding, Severity
from llmsweep.spec.source import SourceMap, YamlSyntaxError, load_yaml, parse_yaml, render_path

CLUSTER_PREFIX = "cluster:"
PACKAGED_FLEET = "catalog/data/runners.yaml"


class HardwareFacts(BaseModel):
    """Host facts of a runner label: usable CPU DRAM (MiB) and GPUs per node."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    available_cpu_dram_mib: int = Field(alias="available-cpu-dram-mib", gt=0, description="Host DRAM usable for KV.")
    gpus_per_node: int = Field(alias="gpus-per-node", gt=0, description="GPUs in one node.")


class FleetCatalog(BaseModel):
    """A validated runner file. Build it with :func:`load_fleet`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    labels: dict[str, list[str]] = Field(description="Scheduling label → node names.")
    hardware: dict[str, HardwareFacts] = Field(default_factory=dict, description="Label → host facts.")
    file: str = Field(default="<packaged>", exclude=True, description="Where the fleet was read from.")
    vouched: frozenset[str] = Field(default_factory=frozenset, exclude=True,
                                    description="Labels the file omits that a user vouches runners carry "
                                                "(`--runner-label`): known, with no nodes listed.")

    def vouching(self, labels: Iterable[str]) -> FleetCatalog:
        """This fleet with `labels` known too: labels GitHub's self-hosted runners carry that the file omits
        (`--runner-label`, e.g. InferenceX's `cluster:mi325x-tw`). They list no nodes, as any unlisted label."""
        extra = frozenset(labels) - self.vouched
        return self.model_copy(update={"vouched": self.vouched | extra}) if extra else self

    def nodes(self, label: str) -> list[str]:
        """Concrete nodes of a label ([] for a label the fleet does not list — InferenceX accepts those)."""
        return list(self.labels.get(label, []))

    def has_label(self, label: str) -> bool:
        return label in self.labels or label in self.vouched

    def hardware_of(self, label: str) -> HardwareFacts | None:
        """Host facts recorded for exactly this label, or None."""
        return self.hardware.get(label)

    def gpus_per_node(self, label: str) -> int | None:
        """GPUs per node of a label: its own record, else the unambiguous record of its GPU family."""
        exact = self.hardware.get(label)
        if exact is not None:
            return exact.gpus_per_node
        family = gpu_sku(label)
        found = {facts.gpus_per_node for name, facts in self.hardware.items() if gpu_sku(name) == family}
        return found.pop() if len(found) == 1 else None

    def gpu_sku(self, label_or_node: str) -> str | None:
        """GPU SKU implied by a label or node name (`cluster:mi300x-amds` → `mi300x`)."""
        return gpu_sku(label_or_node)

    def labels_of_node(self, node: str) -> list[str]:
        """Every label that lists `node`."""
        return [label for label, nodes in self.labels.items() if node in nodes]


def cluster_prefix(node: str) -> str:
    """The launcher prefix of a node: text before the first `_` (`h200-dgxc-slurm_3` → `h200-dgxc-slurm`)."""
    return node.split("_", 1)[0]


_SKU = re.compile(r"^[a-z]+[0-9]+[a-z0-9]*")


def gpu_sku(label_or_node: str) -> str | None:
    """GPU SKU a label or node name implies: `h200`, `mi300x`, `b300`, `gb200`, `rtx6000pro`; None if none.

    Labels and nodes are named `<sku>[-<site>...]` (`cluster:` prefix for exact fleets, `_<n>` suffix for nodes).
    """
    text = label_or_node.strip().lower().removeprefix(CLUSTER_PREFIX)
    head = re.split(r"[-_:/]", text, maxsplit=1)[0]
    match = _SKU.match(head)
    return match.group(0) if match else None


def _finding(source: SourceMap, path: tuple[str | int, ...], message: str, fix: str) -> Finding:
    return Finding(rule="fleet.invalid", severity=Severity.ERROR, file=source.file, line=source.line_of(path),
                   path=render_path(path) if path else None, message=message, fix=fix)


def _validate(data: Any, source: SourceMap) -> FleetCatalog:
    """InferenceX's runner-file rules and messages, raised as ConfigError with findings."""
    labels = data.get("labels") if isinstance(data, dict) else None
    if not isinstance(labels, dict):
        finding = _finding(source, (), "Runner config must define a labels mapping",
                           "add `labels:` mapping each label to a list of node names")
        raise ConfigError(finding.render(), findings=[finding])
    findings: list[Finding] = []
    for key, value in labels.items():
        path = ("labels", key)
        if not isinstance(value, list):
            findings.append(_finding(source, path,
                                     f"Runner config entry '{key}' must be a list, got {type(value).__name__}",
                                     "write the nodes as a YAML list"))
        elif not all(isinstance(item, str) for item in value):
            findings.append(_finding(source, path, f"Runner config entry '{key}' must contain only strings",
                                     "quote node names"))
        elif not value:
            findings.append(_finding(source, path, f"Runner config entry '{key}' cannot be an empty list",
                                     "list at least one node, or delete the label"))
    if findings:
        raise ConfigError("Runner config failed validation:\n" + "\n".join(f.render() for f in findings),
                          findings=findings)
    try:
        return FleetCatalog.model_validate({**data, "file": source.file})
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
            message = f"Runner config failed validation: {render_path(loc)}: {err['msg']}"
            fix = "hardware entries take exactly `available-cpu-dram-mib` and `gpus-per-node` (> 0)"
            findings.append(_finding(source, loc, message, fix))
        raise ConfigError("Runner config failed validation:\n" + "\n".join(f.render() for f in findings),
                          findings=findings) from None


def load_fleet(path: Path | str | None = None) -> FleetCatalog:
    """Read and validate a runner file; `None` → the packaged copy of InferenceX's runners.yaml."""
    if path is None:
        return _packaged()
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"Runner config '{p}' is a directory, not a file.",
                          fix="pass the runner file itself (e.g. runners.yaml) to --runner-config")
    if not p.exists():
        raise ConfigError(f"Runner config file '{p}' does not exist.", fix="pass an existing file to --runner-config")
    try:
        doc = load_yaml(p)
    except OSError as exc:
        raise ConfigError(f"Runner config file '{p}' cannot be read: {exc.strerror or exc}",
                          fix="check the path and its permissions") from None
    except UnicodeDecodeError as exc:
        line = undecodable_line(exc)
        raise ConfigError(f"{p}{f':{line}' if line else ''}: runner config is not UTF-8 text ({exc.reason})",
                          fix="save the file as UTF-8 (that line holds text in another encoding, e.g. Latin-1)"
                          ) from None
    except YamlSyntaxError as exc:
        raise ConfigError(f"{exc.file}:{exc.line}: YAML syntax error in runner config: {exc.problem}",
                          fix=exc.fix or "fix the YAML at that line") from None
    return _validate(doc.data, doc.source)


@lru_cache(maxsize=1)
def _packaged() -> FleetCatalog:
    ref = resources.files("llmsweep").joinpath(PACKAGED_FLEET)
    doc = parse_yaml(ref.read_text(encoding="utf-8"), f"<packaged>/{PACKAGED_FLEET}")
    return _validate(doc.data, doc.source)


def default_fleet() -> FleetCatalog:
    """The packaged fleet (InferenceX's runners.yaml)."""
    return _packaged()
