"""InferenceX's multinode rows pin acceptance with SYNTHETIC_ACCEPTANCE / SYNTHETIC_ACCEPTANCE_LENGTH, which its
launcher's injector turns into the engine's own knobs; no engine reads them. Under llmsweep they had reached the
workers as dead variables, the row reading as pinned while the job measured real acceptance."""

from __future__ import annotations

from pathlib import Path

from llmsweep.policy import validate_files

CASE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy" / "golden-al.hand-written-settings.yaml"


def test_inferencex_s_pin_spelling_is_refused_at_its_line(tmp_path: Path) -> None:
    text = CASE.read_text().replace('"SGLANG_SIMULATE_ACC_LEN=2.5"',
                                    '"SYNTHETIC_ACCEPTANCE=true", "SYNTHETIC_ACCEPTANCE_LENGTH=2.27"')
    path = tmp_path / "r.yaml"
    path.write_text(text)
    hits = [f for f in validate_files([path]).findings if f.rule == "golden-al.hand-written"]
    assert len(hits) == 2 and all(f.line == 26 and f.is_error for f in hits), hits
    assert "InferenceX's launcher's spelling of a pin, which no engine reads" in hits[0].message


def test_inferencex_s_pin_switched_off_is_no_pin(tmp_path: Path) -> None:
    """`SYNTHETIC_ACCEPTANCE=false` says the row measures real acceptance, which it does: it had been refused as a
    row that reads as pinned."""
    for off in ("false", "0", "False"):
        path = tmp_path / f"{off}.yaml"
        path.write_text(CASE.read_text().replace('"SGLANG_SIMULATE_ACC_LEN=2.5"', f'"SYNTHETIC_ACCEPTANCE={off}"'))
        hits = [f for f in validate_files([path]).findings if f.rule == "golden-al.hand-written"]
        assert not hits, (off, hits)


def test_minimax_m3_s_thinking_mode_key_is_read_as_the_served_thinking_mode(tmp_path: Path) -> None:
    """MiniMax-M3's template is switched by `thinking_mode: enabled|disabled` (its golden curves say so); only
    `enable_thinking`/`thinking` booleans were read, so a server told `disabled` pinned the thinking-on AL."""
    from support.recipes import engine_recipe

    serve = ("    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3, "
             "thinking: \"on\" }\n    args:\n"
             "      --default-chat-template-kwargs: '{\"thinking_mode\": \"disabled\"}'\n")
    path = tmp_path / "r.yaml"
    path.write_text(engine_recipe("vllm", "vllm/vllm-openai:v0.26.0", arm="{ tp: 8, spec-decoding: mtp, "
                                  "kv-offloading: none, conc-list: [4] }", serve=serve))
    hits = [f for f in validate_files([path]).findings if f.rule == "golden-al.thinking-mismatch"]
    assert len(hits) == 1 and "thinking_mode: disabled" in hits[0].message, hits
