"""Names: InferenceX exp-names (scripts and dashboards key on them) and llmsweep's unique job ids."""

from __future__ import annotations

import re
from typing import Any

SEQ_LEN_NAMES: dict[str, tuple[int, int]] = {"1k1k": (1024, 1024), "8k1k": (8192, 1024)}
_SEQ_LEN_BY_PAIR = {pair: name for name, pair in SEQ_LEN_NAMES.items()}


def seq_len_str(isl: int, osl: int) -> str:
    """`1k1k` / `8k1k`, else `<isl>_<osl>`."""
    return _SEQ_LEN_BY_PAIR.get((isl, osl), f"{isl}_{osl}")


def fixed_exp_name(model_prefix: str, isl: int, osl: int) -> str:
    """Fixed-seq-len exp-name: `<prefix>_<seqlen>` (no conc, no topology)."""
    return f"{model_prefix}_{seq_len_str(isl, osl)}"


def kv_offload_suffix(kv_offloading: str, backend_name: str | None) -> str:
    return "kvnone" if kv_offloading == "none" else f"kv{kv_offloading}-{backend_name}"


def agentic_exp_name(model_prefix: str, tp: int, conc: int, kv_offloading: str, backend: str | None, spec: str) -> str:
    """`<prefix>_tp<tp>_conc<c>_<kvnone|kv<mode>-<backend>>[_spec-<method>]`."""
    name = f"{model_prefix}_tp{tp}_conc{conc}_{kv_offload_suffix(kv_offloading, backend)}"
    return name + (f"_spec-{spec}" if spec != "none" else "")


def _worker_tag(worker: dict[str, Any], role: str) -> str:
    tag = f"{role}{worker['num-worker']}x{worker['tp']}"
    if worker.get("ep", 1) != 1:
        tag += f"ep{worker['ep']}"
    if worker.get("dp-attn", False):
        tag += "dpa"
    return tag


def multinode_agentic_exp_name(
    model_prefix: str, prefill: dict[str, Any], decode: dict[str, Any], concs: list[int], kv_offloading: str,
    backend: str | None,
) -> str:
    """`<prefix>_p<nw>x<tp>[ep..][dpa]_d<nw>x<tp>[..]_conc<c1xc2…>` + `_kv<mode>-<backend>` only when offloading."""
    suffix = f"_{kv_offload_suffix(kv_offloading, backend)}" if kv_offloading != "none" else ""
    conc = "x".join(str(c) for c in concs)
    return f"{model_prefix}_{_worker_tag(prefill, 'p')}_{_worker_tag(decode, 'd')}_conc{conc}{suffix}"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


MAX_ID_HEAD = 224
"""Longest readable part of a job id (the id is a directory name: 255 bytes at most, `safe` keeps it ASCII)."""


def safe(text: str) -> str:
    """Filesystem-safe form: anything outside `[A-Za-z0-9._-]` becomes `-`."""
    return _UNSAFE.sub("-", text).strip("-")


def _bool(value: Any) -> str:
    return "true" if value else "false"


def _worker_topology(role: str, w: dict[str, Any]) -> str:
    return (f"{role}-tp{w['tp']}-pp{w['pp']}-dcp{w['dcp-size']}-pcp{w['pcp-size']}-ep{w['ep']}"
            f"-dp{_bool(w['dp-attn'])}-nw{w['num-worker']}")


def _conc_tag(conc: int | list[int]) -> str:
    if isinstance(conc, int):
        return str(conc)
    if len(conc) <= 4:
        return "x".join(str(c) for c in conc)
    return f"{min(conc)}-{max(conc)}n{len(conc)}"


def job_id(entry: dict[str, Any], fingerprint: str, *, eval_only: bool = False) -> str:
    """RESULT_FILENAME-style id plus a 12-hex suffix; filesystem-safe.

    The suffix given here (the recipe fingerprint's first 12 hex) is provisional: `plan.matrix._unique_ids` replaces
    it with a hash of (fingerprint, recipe key, occurrence) so ids do not depend on file order.

    `<exp-name>_<precision>_<framework>_<topology>_disagg-<d>_spec-<s>_conc<c>_<runner>[_eval]_<fp12>`.
    """
    if "prefill" in entry:
        topology = f"{_worker_topology('prefill', entry['prefill'])}_{_worker_topology('decode', entry['decode'])}"
    else:
        topology = (f"tp{entry['tp']}-pp{entry['pp']}-dcp{entry['dcp-size']}-pcp{entry['pcp-size']}"
                    f"-ep{entry['ep']}-dpa{_bool(entry['dp-attn'])}")
    parts = [
        entry["exp-name"],
        entry["precision"],
        entry["framework"],
        topology,
        f"disagg-{_bool(entry.get('disagg', False))}",
        f"spec-{entry['spec-decoding']}",
        f"conc{_conc_tag(entry['conc'])}",
        entry["runner"],
    ]
    if eval_only:
        parts.append("eval")
    # A job id names a directory: the readable head is capped so it stays under the 255-byte file-name limit
    # (recipe text is free-form; InferenceX's longest ids are ~200), the unique hash suffix is always kept.
    head = "_".join(safe(str(p)) for p in parts)[:MAX_ID_HEAD].rstrip("_")
    return f"{head}_{safe(fingerprint[:12])}"
