"""Model directories engines serve offline: real architectures with dummy weights, or real weights from a GGUF file.

Public API: :func:`synth_model` with a :class:`SynthRequest`; :data:`PRESETS` names the shapes; :func:`parameter_count`
sizes any supported config; :func:`import_gguf` with an :class:`ImportRequest` writes a GGUF model's real weights.
Heavy pieces (`tokenizers`, `safetensors`, `gguf`) are imported only when used.
"""

from __future__ import annotations

from llmsweep.modelsynth.architectures import PRESETS, preset_config, scale_config
from llmsweep.modelsynth.gguf_import import ImportRequest, ImportResult, import_gguf
from llmsweep.modelsynth.synth import PROVENANCE_FILE, SynthRequest, SynthResult, synth_model
from llmsweep.modelsynth.tensors import parameter_count, tensor_specs

__all__ = [
    "PRESETS",
    "PROVENANCE_FILE",
    "ImportRequest",
    "ImportResult",
    "SynthRequest",
    "SynthResult",
    "import_gguf",
    "parameter_count",
    "preset_config",
    "scale_config",
    "synth_model",
    "tensor_specs",
]
