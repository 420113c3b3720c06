"""Dummy-weight model directories: real architectures, offline tokenizer, random or engine-filled weights.

Public API: :func:`synth_model` with a :class:`SynthRequest`; :data:`PRESETS` names the shapes; :func:`parameter_count`
sizes any supported config. Heavy pieces (`tokenizers`, `safetensors`) are imported only when used.
"""

from __future__ import annotations

from llmsweep.modelsynth.architectures import PRESETS, preset_config, scale_config
from llmsweep.modelsynth.synth import PROVENANCE_FILE, SynthRequest, SynthResult, synth_model
from llmsweep.modelsynth.tensors import parameter_count, tensor_specs

__all__ = [
    "PRESETS",
    "PROVENANCE_FILE",
    "SynthRequest",
    "SynthResult",
    "parameter_count",
    "preset_config",
    "scale_config",
    "synth_model",
    "tensor_specs",
]
