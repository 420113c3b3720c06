"""The reuse identity: every part the issue names is in it, llmsweep's measurement definitions included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from changes_scratch import write_recipe

from llmsweep.changes.reuse import reuse_doc, reuse_key, reuse_keys
from llmsweep.execute.base import ImageMount
from llmsweep.metrics import version
from llmsweep.plan import Job, jobs_from_files
from llmsweep.workload.scenario import repeat_index


@pytest.fixture
def job(tmp_path: Path) -> Job:
    return jobs_from_files([write_recipe(tmp_path)])[0]


def test_measurement_version_is_part_of_the_identity(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    before = reuse_key(job, "launch")
    monkeypatch.setattr(version, "MEASUREMENT_VERSION", version.MEASUREMENT_VERSION + 1)
    assert reuse_key(job, "launch") != before


def test_a_metric_definition_change_is_part_of_the_identity(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.metrics import registry

    before = reuse_key(job, "launch")
    defs = registry.all_metrics()
    changed = [defs[0].__class__(defs[0].name, "other-unit", defs[0].description), *defs[1:]]
    monkeypatch.setattr(registry, "all_metrics", lambda: changed)
    assert reuse_key(job, "launch") != before


def test_launch_image_workload_fingerprint_and_repeat_are_part_of_the_identity(job: Job) -> None:
    key = reuse_key(job, "launch")
    assert reuse_key(job, "launch") == key
    assert reuse_key(job, "other launch") != key
    assert reuse_key(job.model_copy(update={"image": "x/y:z"}), "launch") != key
    assert reuse_key(job.model_copy(update={"recipe_fingerprint": "0" * 64}), "launch") != key
    wl = job.workload.model_copy(update={"seed": 7})
    assert reuse_key(job.model_copy(update={"workload": wl}), "launch") != key
    assert reuse_key(job, "launch", repeat=2) != key
    assert repeat_index(job.id + "-repeat3") == 3 and repeat_index(job.id) == 1


def test_a_repeats_identity_holds_the_sample_it_draws_and_a_first_runs_is_as_it_was(tmp_path: Path) -> None:
    """Repeat k draws the sample of its point, the one repeat k of every arm draws (`scenario.sample_name`); one
    measured when a repeat's sample followed its job id is not what the repeat draws now, so its identity says
    which sample it draws. A first run's identity holds no such part: the keys stored results were recorded under
    stay valid."""
    jobs = jobs_from_files([write_recipe(tmp_path)])  # arms tp 4 and tp 8, each at conc 2 and 4
    for job in jobs:
        doc = reuse_doc(job, "launch")
        assert "sample" not in doc
        assert doc["workload"] == job.workload.model_dump(mode="json", exclude={"traces": {"revision"}})
    samples = {(j.tp, j.conc, k): reuse_doc(j, "launch", repeat=k)["sample"] for j in jobs for k in (2, 3)}
    for conc in (2, 4):
        for k in (2, 3):
            assert samples[(4, conc, k)] == samples[(8, conc, k)]
    assert len({samples[(4, conc, k)] for conc in (2, 4) for k in (2, 3)}) == 4


def test_env_change_changes_the_rendered_launch_key(tmp_path: Path) -> None:
    a = jobs_from_files([write_recipe(tmp_path / "a")])
    b = jobs_from_files([write_recipe(tmp_path / "b", arm_var="other")])
    ka, kb = reuse_keys(a, simulate=False), reuse_keys(b, simulate=False)
    same = {j.id for j in a if ka[j.id] == kb.get(j.id)}
    assert same == {j.id for j in a if j.tp == 4}


def test_a_simulated_jobs_identity_holds_the_simulators_digest_and_a_real_engines_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new hardware figure or step-time model gives other simulated numbers under the same launch: a stored
    simulated result is reused only under the same simulator (its code and catalogs); a real engine's are not tied
    to it."""
    from llmsweep.sim import identity

    sim_recipe = write_recipe(tmp_path)  # `serve.engine: sim`
    sim_jobs = jobs_from_files([sim_recipe])
    engine = tmp_path / "engine.yaml"  # the same recipe on its framework's engine (SGLang)
    engine.write_text(sim_recipe.read_text().replace("    engine: { name: sim }\n", ""), encoding="utf-8")
    real_jobs = jobs_from_files([engine])
    real, simulated = reuse_keys(real_jobs, simulate=False), reuse_keys(sim_jobs, simulate=False)
    assert real and simulated and all("/measured/wall/" in key for key in real.values())
    monkeypatch.setattr(identity, "simulator_digest", lambda: "0" * 16)
    assert reuse_keys(real_jobs, simulate=False) == real
    moved = reuse_keys(sim_jobs, simulate=False)
    assert all(moved[j] != key for j, key in simulated.items())




def test_the_simulators_digest_moves_with_a_catalog_file_it_reads(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.sim.identity import simulator_digest

    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path))
    try:
        simulator_digest.cache_clear()
        before = simulator_digest()
        (tmp_path / "hardware.yaml").write_text("mi300x: {hbm_tbps: 2.65}\n", encoding="utf-8")
        simulator_digest.cache_clear()
        assert simulator_digest() != before
    finally:
        simulator_digest.cache_clear()


@pytest.mark.parametrize("module", ["llmsweep.cli.sim", "llmsweep.sim.serve_args", "llmsweep.execute.virtual",
                                    "llmsweep.execute.virtual_disagg",
                                    "llmsweep.power.virtual", "llmsweep.sim.engine", "llmsweep.engines.sim",
                                    # the live roles' router and servers, since they left `llmsweep.sim`
                                    "llmsweep.router", "llmsweep.http_app"])
def test_the_simulators_digest_moves_with_the_code_that_makes_its_figures(module: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """README (Reuse): a simulated job's key holds the simulator's digest, its code and catalogs, as a new figure gives
    other numbers under the same launch. The digest read `llmsweep.sim` and the engine adapter only: a changed default
    of `sim serve` (`--max-running-requests`, `--mem-fraction-static`: the engine config of every launch that omits
    them, made in `sim/serve_args.py`), the virtual-time drive or the modelled power left it as it was, and `run
    --reuse` stood such jobs on results the new code would not give."""
    import importlib
    from pathlib import Path

    from llmsweep.sim.identity import simulator_digest

    source = Path(importlib.import_module(module).__file__ or "").resolve()
    read = Path.read_bytes

    def edited(path: Path) -> bytes:
        return read(path) + (b"\n# a default changed\n" if path.resolve() == source else b"")

    try:
        simulator_digest.cache_clear()
        before = simulator_digest()
        monkeypatch.setattr(Path, "read_bytes", edited)
        simulator_digest.cache_clear()
        assert simulator_digest() != before, f"{source} is not in the simulator's digest"
    finally:
        monkeypatch.undo()
        simulator_digest.cache_clear()


def test_the_interpreter_that_runs_llmsweep_is_not_part_of_a_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator launched from another venv (or another path to the same Python) is the same server: its
    results are reused, and its history is found."""
    import sys

    from llmsweep.engines.launch import LaunchSpec

    tail = ("-m", "llmsweep.cli.main", "sim", "serve", "--model", "llama-1b")
    here = LaunchSpec(engine="sim", argv=(sys.executable, *tail), port=1).fingerprint()
    monkeypatch.setattr(sys, "executable", "/elsewhere/venv/bin/python3")
    there = LaunchSpec(engine="sim", argv=("/elsewhere/venv/bin/python3", *tail), port=1)
    assert there.fingerprint() == here
    assert LaunchSpec(engine="sim", argv=("/usr/bin/python2", *tail), port=1).fingerprint() != here  # not llmsweep's


def test_the_gates_a_job_is_judged_by_are_part_of_its_identity(tmp_path: Path) -> None:
    """A result measured without power is not reused where power is required (it would have been refused), and a
    pinned job judged under another read-back tolerance is not either."""
    from llmsweep.changes.reuse import job_gates
    from llmsweep.execute.lifecycle import LifecycleSettings
    from llmsweep.execute.readback import ReadbackSettings
    from llmsweep.plan.job import Acceptance
    from llmsweep.power.sampler import PowerSettings

    jobs = jobs_from_files([write_recipe(tmp_path)])
    plain = reuse_keys(jobs, simulate=True, settings=LifecycleSettings())
    assert reuse_keys(jobs, simulate=True) == plain  # the default settings are the run's defaults
    powered = reuse_keys(jobs, simulate=True, settings=LifecycleSettings(power=PowerSettings(require=True)))
    assert plain and all(powered[j] != key for j, key in plain.items())
    loose = LifecycleSettings(readback=ReadbackSettings(al_tolerance=0.3))
    pinned = jobs[0].model_copy(update={"acceptance": Acceptance(value=2.5, source="pinned", method="mtp",
                                                                  thinking="off")})
    assert job_gates(pinned, loose) != job_gates(pinned, LifecycleSettings())
    unpinned = jobs[0].model_copy(update={"acceptance": None})
    assert job_gates(unpinned, loose) == job_gates(unpinned, LifecycleSettings())  # no acceptance pinned: not judged


def test_a_request_timeout_other_than_the_default_is_part_of_the_identity(tmp_path: Path) -> None:
    """A result measured under the 600-s timeout is not reused by a run with `--request-timeout 30`, whose client
    would have failed the requests that took longer (and so perhaps the point); default runs keep their keys."""
    from llmsweep.execute.lifecycle import LifecycleSettings

    jobs = jobs_from_files([write_recipe(tmp_path)])
    plain = reuse_keys(jobs, simulate=True, settings=LifecycleSettings())
    short = reuse_keys(jobs, simulate=True, settings=LifecycleSettings(request_timeout_s=30))
    assert plain and all(short[j] != key for j, key in plain.items())
    assert reuse_keys(jobs, simulate=True, settings=LifecycleSettings(request_timeout_s=600)) == plain


def test_what_a_local_model_path_holds_is_part_of_the_identity(tmp_path: Path) -> None:
    """Weights replaced at the same `serve.model-path` (`model synth --force`, another import) kept the job's key, so
    --reuse and --resume stood on results of other weights. What the path holds is keyed now: small files by their
    bytes, large ones by name, size and time; a job that names no local path keeps the key it had."""
    from llmsweep.changes import reuse

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 64}')
    (model / "model.safetensors").write_bytes(b"\0" * 1024)
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace("  serve:\n", f"  serve:\n    model-path: {model}\n", 1))
    (job,) = [j for j in jobs_from_files([recipe]) if j.tp == 8 and j.conc == 2]
    plain = jobs_from_files([write_recipe(tmp_path / "p")])[0]
    assert reuse.local_files_digest(plain) is None
    assert reuse_key(plain, "launch") == reuse_key(plain, "launch", local_files=None)

    def key() -> str:
        return reuse_keys([job], simulate=True)[job.id]

    first = key()
    assert key() == first
    (model / "config.json").write_text('{"hidden_size": 128}')  # another model's config at the same path
    second = key()
    assert second != first
    (model / "model.safetensors").write_bytes(b"\1" * 2048)  # other weights
    assert key() != second
    big = model / "model.safetensors"
    reuse.SMALL_FILE_BYTES, saved = 16, reuse.SMALL_FILE_BYTES
    try:  # a large file counts by its size and time, never read
        before = key()
        os.utime(big, ns=(big.stat().st_atime_ns, big.stat().st_mtime_ns + 10**9))
        assert key() != before
    finally:
        reuse.SMALL_FILE_BYTES = saved


def test_what_a_local_draft_model_path_holds_is_part_of_the_identity(tmp_path: Path) -> None:
    """A drafter at a local path (`serve.spec-decoding.draft-model: /models/...`, the schema's "HF id or path", or the
    `out/draft` that `model synth --with-draft` writes) is served beside the target: another drafter copied to the same
    path drafts other tokens at another cost, and the key had stayed the same, so --reuse stood on the old drafter's
    results under the new one's name."""
    from support.recipes import engine_recipe

    draft = tmp_path / "drafter"
    draft.mkdir()
    (draft / "config.json").write_text('{"hidden_size": 64}')
    (draft / "model.safetensors").write_bytes(b"\0" * 1024)
    path = tmp_path / "mm3.yaml"
    path.write_text(engine_recipe(
        "vllm", "vllm/vllm-openai-rocm:v0.27.1",
        arm="{ tp: 4, spec-decoding: mtp, kv-offloading: none, conc-list: [4] }",
        serve=f"    spec-decoding: {{ method: eagle3, num-steps: 3, draft-model: {draft}, golden-curve: gqa }}\n",
        model="amd/MiniMax-M3-MXFP4", prefix="minimaxm3", runner="cluster:mi355x-amds"))
    (job,) = jobs_from_files([path])
    for simulate in (True, False):
        before = reuse_keys([job], simulate=simulate)[job.id]
        assert reuse_keys([job], simulate=simulate)[job.id] == before
        (draft / "config.json").write_text(f'{{"hidden_size": {128 if simulate else 256}}}')  # another drafter
        assert reuse_keys([job], simulate=simulate)[job.id] != before, f"simulate={simulate}"


def test_what_a_local_file_named_in_serve_args_holds_is_part_of_the_identity(tmp_path: Path) -> None:
    """A file a recipe's free-form engine args name (`--chat-template /path/t.jinja`, a config file, a drafter in
    `--speculative-config`) is read by the server, yet only its path was in the key: a template edited in place kept
    it, and --reuse stood on results measured with the old template. What a local path holds is keyed now, as for
    `serve.model-path`; a path that does not exist here (one inside the image) stays text, as the launch writes it."""
    from support.recipes import engine_recipe

    from llmsweep.changes import reuse

    template = tmp_path / "tmpl" / "chat.jinja"
    template.parent.mkdir()
    template.write_text("{{ messages }}")
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text('{"hidden_size": 64}')
    generation = tmp_path / "generation"
    generation.mkdir()
    (generation / "generation_config.json").write_text('{"temperature": 0.6}')
    in_image = "/opt/image-only/chat.jinja"

    def job_with(args: str) -> Job:
        path = tmp_path / "r.yaml"
        path.write_text(engine_recipe("vllm", "vllm/vllm-openai-rocm:v0.27.1",
                                      arm="{ tp: 4, kv-offloading: none, conc-list: [4] }",
                                      serve=f"    args:\n{args}", model="amd/MiniMax-M3-MXFP4", prefix="minimaxm3",
                                      runner="cluster:mi355x-amds"))
        (job,) = jobs_from_files([path])
        return job

    image_only = job_with(f"      --chat-template: {in_image}\n")
    assert reuse.local_files_digest(image_only) is None  # text, in the launch: the key it had
    inline = job_with(f"      --chat-template: \"{{{{ '/' }}}}{'x' * 300}/y\"\n"
                      "      --tokenizer: ~no-such-user-x/tok\n")
    assert reuse.local_files_digest(inline) is None  # a template given inline, not a path: no error, text as it was
    job = job_with(f"      --chat-template: {template}\n      --generation-config={generation}: true\n"
                   f"      --speculative-config: {{ model: {drafter}, num_speculative_tokens: 3 }}\n")
    for simulate in (True, False):
        before = reuse_keys([job], simulate=simulate)[job.id]
        assert reuse_keys([job], simulate=simulate)[job.id] == before
        template.write_text(f"{{{{ messages }}}} edited {simulate}")  # the template edited in place
        after_template = reuse_keys([job], simulate=simulate)[job.id]
        assert after_template != before, f"simulate={simulate}"
        # a folder named in a flag's own `--flag=value`
        (generation / "generation_config.json").write_text(f'{{"temperature": {0.7 if simulate else 0.8}}}')
        after_config = reuse_keys([job], simulate=simulate)[job.id]
        assert after_config != after_template, f"simulate={simulate}"
        (drafter / "config.json").write_text(f'{{"hidden_size": {128 if simulate else 256}}}')  # inside a mapping
        assert reuse_keys([job], simulate=simulate)[job.id] != after_config, f"simulate={simulate}"


def test_what_a_local_file_named_in_the_servers_environment_holds_is_part_of_the_identity(tmp_path: Path) -> None:
    """A file a recipe's server environment names — a `serve.env` value (`LMCACHE_CONFIG_FILE: /cfg/lmcache.yaml`,
    an arm's override of it, a folder of a `PYTHONPATH` list) or a multinode worker's InferenceX `additional-settings`
    item (`CONFIG_FILE=...`, passed to its launch as environment) — is read by the server, yet only its path was in
    the key: the file edited in place kept it, and --reuse/--resume stood on results measured under the old settings.
    What such a path holds is keyed now, as for `serve.args`; a job that names none keeps the key it had, and a path
    that does not exist here (one inside the image) stays text, as the launch writes it."""
    from changes_scratch import write_multinode

    from llmsweep.changes import reuse

    settings = tmp_path / "cfg" / "lmcache.yaml"
    settings.parent.mkdir()
    settings.write_text("chunk_size: 256\n")
    arm_file = tmp_path / "cfg" / "arm.json"
    arm_file.write_text('{"a": 1}')
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "sitecustomize.py").write_text("PATCHED = 1\n")
    worker_file = tmp_path / "cfg" / "worker.yaml"
    worker_file.write_text("decode: 1\n")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text()
                      .replace('      SHARED_VAR: "1"\n',
                               f'      SHARED_VAR: "1"\n      LMCACHE_CONFIG_FILE: {settings}\n'
                               f'      PYTHONPATH: /opt/image-only/lib:{patches}\n'
                               '      IMAGE_ONLY: /opt/image-only/x.yaml\n')
                      .replace('        ARM_VAR: "a"\n', f'        ARM_VAR: "a"\n        ARM_FILE: {arm_file}\n'))
    jobs = jobs_from_files([recipe])
    tp4 = next(j for j in jobs if j.tp == 4)
    tp8 = next(j for j in jobs if j.tp == 8)
    plain = jobs_from_files([write_recipe(tmp_path / "p")])[0]
    assert reuse.env_paths(plain) == [] and reuse.local_files_digest(plain) is None  # values that name no path
    only_image = plain.model_copy(update={"serve": plain.serve.model_copy(  # type: ignore[union-attr]
        update={"env": {"CONFIG": "/opt/image-only/x.yaml", "URL": "http://host:8000/v1"}})})
    assert reuse.local_files_digest(only_image) is None  # nothing of it exists here: the text the launch writes

    def key(job: Job, simulate: bool) -> str:
        return reuse_keys([job], simulate=simulate)[job.id]

    for simulate in (True, False):
        before, arm_before = key(tp4, simulate), key(tp8, simulate)
        assert key(tp4, simulate) == before
        settings.write_text(f"chunk_size: {512 if simulate else 1024}\n")  # the settings file edited in place
        edited = key(tp4, simulate)
        assert edited != before and key(tp8, simulate) != arm_before, f"simulate={simulate}"
        (patches / "sitecustomize.py").write_text(f"PATCHED = {2 if simulate else 3}\n")  # an item of a path list
        patched = key(tp4, simulate)
        assert patched != edited, f"simulate={simulate}"
        arm_patched = key(tp8, simulate)
        arm_file.write_text(f'{{"a": {2 if simulate else 3}}}')  # the arm's override names it: that arm's key only
        assert key(tp4, simulate) == patched and key(tp8, simulate) != arm_patched, f"simulate={simulate}"

    mn = write_multinode(tmp_path / "mn")
    mn.write_text(mn.read_text().replace(
        "decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}",
        f'decode: {{num-worker: 1, tp: 8, ep: 1, dp-attn: false, additional-settings: ["CONFIG_FILE={worker_file}", '
        '"DECODE_MTP_SIZE=0"]}'))
    (worker,) = jobs_from_files([mn])
    assert reuse.env_paths(worker) == [str(worker_file)]
    for simulate in (True, False):
        before = key(worker, simulate)
        worker_file.write_text(f"decode: {2 if simulate else 3}\n")
        assert key(worker, simulate) != before, f"simulate={simulate}"


def test_a_folder_the_servers_environment_names_whole_is_keyed_as_its_text(tmp_path: Path) -> None:
    """A folder a `serve.env` value names whole — `TORCHINDUCTOR_CACHE_DIR`, `TMPDIR`, a log folder — is one the
    server writes into as it runs. It was keyed by the files in it: a cache file appearing moved the key, so `--resume`
    measured the finished jobs again ('not resumed') and `--reuse` never matched. It counts as its text (the launch's
    env holds it); a file a value names whole, and a folder of a `:`-separated list (PYTHONPATH), are still keyed by
    what they hold."""
    from llmsweep.changes import reuse

    cache, patches = tmp_path / "inductor-cache", tmp_path / "patches"
    cache.mkdir()
    patches.mkdir()
    (patches / "sitecustomize.py").write_text("PATCHED = 1\n")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace(
        '      SHARED_VAR: "1"\n',
        f'      SHARED_VAR: "1"\n      TORCHINDUCTOR_CACHE_DIR: {cache}\n      TMPDIR: {cache}\n'
        f'      PYTHONPATH: {patches}:/opt/image-only/lib\n'))
    job = jobs_from_files([recipe])[0]
    assert str(cache) not in reuse.env_paths(job) and str(patches) in reuse.env_paths(job)
    for simulate in (True, False):
        before = reuse_keys([job], simulate=simulate)[job.id]
        (cache / f"fxgraph-{simulate}.json").write_text("{}")  # the server's cache, written as it serves
        assert reuse_keys([job], simulate=simulate)[job.id] == before, f"simulate={simulate}"
        (patches / "sitecustomize.py").write_text(f"PATCHED = {2 if simulate else 3}\n")  # what it imports
        assert reuse_keys([job], simulate=simulate)[job.id] != before, f"simulate={simulate}"
    other = recipe.read_text().replace(f"TORCHINDUCTOR_CACHE_DIR: {cache}", f"TORCHINDUCTOR_CACHE_DIR: {patches}")
    recipe.write_text(other)  # another folder named: another launch, another key
    assert reuse_keys(jobs_from_files([recipe]), simulate=True)[job.id] != reuse_keys([job], simulate=True)[job.id]


def test_a_search_path_of_one_folder_is_keyed_by_what_it_holds_as_a_list_of_two_is(tmp_path: Path) -> None:
    """`PYTHONPATH: /opt/patches` names a folder of code the server imports, as `PYTHONPATH: /opt/a:/opt/patches`
    does: what it holds changes what runs. Named alone, it was taken for a folder the server writes into (a value
    naming a folder whole counts as its text), so patches edited in place kept the key and `--reuse`/`--resume` stood
    on results measured under the old code. A search path (`SEARCH_PATH_VARS`: PYTHONPATH, LD_LIBRARY_PATH, PATH) is
    keyed by what its folders hold, one or many, in `serve.env` and in a worker's `additional-settings`; any other
    folder a value names whole stays its text."""
    from changes_scratch import write_multinode

    from llmsweep.changes import reuse

    cache, patches, libs = tmp_path / "cache", tmp_path / "patches", tmp_path / "libs"
    for folder in (cache, patches, libs):
        folder.mkdir()
    (patches / "sitecustomize.py").write_text("PATCHED = 1\n")
    (libs / "libpatch.so").write_bytes(b"\x7fELF 1")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace(
        '      SHARED_VAR: "1"\n',
        f'      SHARED_VAR: "1"\n      TMPDIR: {cache}\n      PYTHONPATH: {patches}\n      LD_LIBRARY_PATH: {libs}\n'))
    job = jobs_from_files([recipe])[0]
    assert sorted(reuse.env_paths(job)) == sorted([str(patches), str(libs)])
    for simulate in (True, False):
        before = reuse_keys([job], simulate=simulate)[job.id]
        (cache / f"scratch-{simulate}").write_text("x")  # written by the server as it runs: no new key
        assert reuse_keys([job], simulate=simulate)[job.id] == before, f"simulate={simulate}"
        (patches / "sitecustomize.py").write_text(f"PATCHED = {2 if simulate else 3}\n")  # what it imports
        patched = reuse_keys([job], simulate=simulate)[job.id]
        assert patched != before, f"simulate={simulate}"
        (libs / "libpatch.so").write_bytes(f"\x7fELF {simulate}".encode())  # what it loads
        assert reuse_keys([job], simulate=simulate)[job.id] != patched, f"simulate={simulate}"

    mn = write_multinode(tmp_path / "mn")
    mn.write_text(mn.read_text().replace(
        "decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}",
        f'decode: {{num-worker: 1, tp: 8, ep: 1, dp-attn: false, additional-settings: ["PYTHONPATH={patches}"]}}'))
    (worker,) = jobs_from_files([mn])
    assert reuse.env_paths(worker) == [str(patches)]
    before = reuse_keys([worker], simulate=True)[worker.id]
    (patches / "sitecustomize.py").write_text("PATCHED = 4\n")
    assert reuse_keys([worker], simulate=True)[worker.id] != before


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files keying reads whole from now on."""
    read, names = Path.read_bytes, []

    def counted(self: Path) -> bytes:
        names.append(self.name)
        return read(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    return names


def test_keying_a_folder_reads_at_most_its_budget_and_counts_the_rest_by_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`PATH: /usr/local/bin:/usr/bin` in a recipe's serve.env made every `run` read /usr/bin whole to key its jobs
    (here 1,166 files, 442 MB: seconds per run, more on a cold disk; an `LD_LIBRARY_PATH` of system libraries more).
    A folder's small files are read, in name order, while they fit in `FOLDER_READ_BYTES`; the others count by name,
    size and modification time, as a large file does: an edited one still moves the key."""
    from llmsweep.changes import reuse

    bins = tmp_path / "bin"
    bins.mkdir()
    for name, text in (("a-tool", "aaaaa"), ("b-tool", "bbbbb"), ("c-tool", "cc")):
        (bins / name).write_text(text)
    whole = reuse._path_digest(bins)
    reads = _reads(monkeypatch)
    monkeypatch.setattr(reuse, "FOLDER_READ_BYTES", 8)
    bounded = reuse._path_digest(bins)
    assert reads == ["a-tool", "c-tool"]  # b-tool does not fit in what a-tool left; c-tool does
    assert bounded != whole  # b-tool counts by its status
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace('      SHARED_VAR: "1"\n', f'      PATH: {bins}:/nonexistent\n'))
    job = jobs_from_files([recipe])[0]
    before = reuse_keys([job], simulate=True)[job.id]
    stamp = (bins / "b-tool").stat()
    (bins / "b-tool").write_text("BBBBB")  # the tool past the budget replaced in place, a later time
    os.utime(bins / "b-tool", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))
    changed = reuse_keys([job], simulate=True)[job.id]
    assert changed != before
    stamp = (bins / "a-tool").stat()
    (bins / "a-tool").write_text("AAAAA")  # one inside the budget edited, its old time given back: read, so seen
    os.utime(bins / "a-tool", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert reuse_keys([job], simulate=True)[job.id] != changed


def test_byte_identical_folders_past_the_budget_key_apart_by_their_files_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the README and `FOLDER_READ_BYTES` promise of a folder larger than the budget: two hosts' byte-identical
    copies (here two folders whose files were written at other times) key alike while every file is read, apart once
    some count by their status — `--reuse` across hosts misses for them —, and alike again where the copy kept the
    files' times; editing a file past the budget, a new time, still moves the key (a miss, not a stale hit)."""
    from llmsweep.changes import reuse

    here, there = tmp_path / "here" / "lib", tmp_path / "there" / "lib"
    for folder, when in ((here, 1_700_000_000), (there, 1_700_000_500)):
        folder.mkdir(parents=True)
        for name in ("liba.so", "libb.so", "libc.so"):
            (folder / name).write_bytes(b"\x7fELF " + name.encode())
            os.utime(folder / name, (when, when))
    assert reuse._path_digest(here) == reuse._path_digest(there)  # within the budget: by their bytes
    monkeypatch.setattr(reuse, "FOLDER_READ_BYTES", 16)  # liba.so read; the others by name, size and time
    apart = reuse._path_digest(here)
    assert apart != reuse._path_digest(there)
    for name in ("libb.so", "libc.so"):  # the copy kept the times (rsync -a, cp -p)
        os.utime(there / name, ns=(os.stat(here / name).st_atime_ns, os.stat(here / name).st_mtime_ns))
    assert reuse._path_digest(there) == apart
    (here / "libc.so").write_bytes(b"\x7fELF libC.so")  # edited past the budget, now: its time moved
    assert reuse._path_digest(here) != apart


def test_a_process_remembers_a_folders_digest_by_its_files_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keying a folder again in one process reads none of its files while their status is what it was; a file
    edited in place since is read again, even one given its old modification time back (its status-change time
    moved), and a folder of files written just now (which the file system's coarse clock may stamp again alike) is
    read each time."""
    import time

    from llmsweep.changes import reuse

    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "sitecustomize.py").write_text("PATCHED = 1\n")
    reads = _reads(monkeypatch)
    first = reuse._path_digest(patches)
    assert reuse._path_digest(patches) == first and reads == ["sitecustomize.py"] * 2  # just written: read again
    monkeypatch.setattr(reuse, "RACY_NS", -10**12)  # as though every file had been written long ago
    reuse._path_digest(patches)
    reads.clear()
    assert reuse._path_digest(patches) == first and reuse._path_digest(tmp_path / "." / "patches") == first
    assert reads == []  # remembered, under another name of the folder too
    time.sleep(0.05)  # past a tick of the file system's clock
    stamp = (patches / "sitecustomize.py").stat()
    (patches / "sitecustomize.py").write_text("PATCHED = 2\n")  # the same size, the old time given back
    os.utime(patches / "sitecustomize.py", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert reuse._path_digest(patches) != first and reads == ["sitecustomize.py"]


def test_a_key_recorded_without_the_local_files_part_is_named_as_such_not_as_one_of_the_hidden_parts(
        tmp_path: Path) -> None:
    """A stored result recorded where the files its job's server environment names did not exist, or by an llmsweep
    that did not key what they hold (a `serve.env` file before it was keyed, a `PYTHONPATH` of one folder), is
    measured again once: its key holds no local-files part, so it does not say what they held. `run --reuse` and
    `--resume` said only 'one of what a run records only inside the key's hash: launch, simulator, gates, ...',
    which reads as if anything might have changed; the recorded identity is the job's now without that part, and
    they say so, and why."""
    from llmsweep.changes import reuse
    from llmsweep.execute.lifecycle import LifecycleSettings

    settings = tmp_path / "cfg" / "lmcache.yaml"
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace(
        '      SHARED_VAR: "1"\n', f'      SHARED_VAR: "1"\n      LMCACHE_CONFIG_FILE: {settings}\n'))
    job = jobs_from_files([recipe])[0]
    stored = reuse.stored_parts(job.to_json(), job.id, version.measurement_identity())
    for simulate in (True, False):
        then = reuse_keys([job], simulate=simulate)[job.id]  # the path names nothing here: keyed as its text
        settings.parent.mkdir(exist_ok=True)
        settings.write_text("chunk_size: 256\n")
        now = reuse_keys([job], simulate=simulate)[job.id]
        assert now != then
        (said,) = reuse.key_differences(now, then, stored)
        assert said.startswith(reuse.KEY_PARTS["local_files"] + ", which the key it was recorded under holds none "
                               "of: none of those paths existed where its run was planned, or an earlier llmsweep "
                               "did not key what they hold"), said
        # recorded without the file and under another gate: not said to lack only the local-files part
        settings.unlink()
        other = reuse_keys([job], simulate=simulate, settings=LifecycleSettings(request_timeout_s=123))[job.id]
        settings.write_text("chunk_size: 256\n")
        (said,) = reuse.key_differences(now, other, stored)
        assert said.startswith("one of what a run records only inside the key's hash: "), said
        settings.unlink()


def test_what_an_upgrade_changed_in_how_a_part_is_keyed_is_named_from_the_parts_the_run_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An llmsweep upgrade that changes how one part of the key is computed (here: how a folder on a search path is
    keyed, `FOLDER_READ_BYTES`) gives every such job a new key; from the stored job alone `run --reuse` and `--resume`
    could only say 'one of what a run records only inside the key's hash: ...'. A run records each key's part digests
    beside it (run.json's `reuse_parts`, `record_parts`), and what differs is read from them: that part alone. A run
    of an earlier llmsweep, which recorded none, is inferred as before."""
    from llmsweep.changes import reuse

    bins = tmp_path / "bin"
    bins.mkdir()
    for name in ("a-tool", "b-tool"):
        (bins / name).write_text(name * 4)
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace('      SHARED_VAR: "1"\n', f'      PATH: {bins}\n'))
    job = jobs_from_files([recipe])[0]
    stored = reuse.stored_parts(job.to_json(), job.id, version.measurement_identity())
    then = reuse_keys([job], simulate=True)[job.id]
    assert isinstance(then, reuse.ReuseKey)
    record = {"reuse_keys": {job.id: str(then)}, reuse.RECORDED_PARTS: reuse.record_parts([then])}
    assert json.loads(json.dumps(record)) == record  # as run.json and the store keep it
    monkeypatch.setattr(reuse, "FOLDER_READ_BYTES", 8)  # the upgrade: b-tool counts by its status now
    now = reuse_keys([job], simulate=True)[job.id]
    assert now != then and isinstance(now, reuse.ReuseKey)
    recorded = reuse.recorded_parts_of(record, then)
    assert reuse.key_differences(now, then, stored, recorded_parts=recorded) == [reuse.KEY_PARTS["local_files"]]
    (inferred,) = reuse.key_differences(now, then, stored)  # no parts recorded: an earlier llmsweep's run
    assert inferred.startswith("one of what a run records only inside the key's hash: "), inferred
    assert reuse.recorded_parts_of({"reuse_keys": record["reuse_keys"]}, then) is None

    # a part the recorded key holds and this llmsweep does not key (a later llmsweep's), one it lacks, or none at all
    assert recorded is not None
    later = {**recorded, "local_files": reuse.recorded_digests(now)["local_files"], "kernel": "0" * 16}
    assert reuse.key_differences(now, then, stored, recorded_parts=later) == [
        "`kernel`, a part the key it was recorded under holds that this llmsweep does not key"]
    without = {k: v for k, v in later.items() if k not in ("local_files", "kernel")}
    (said,) = reuse.key_differences(now, then, stored, recorded_parts=without)
    assert said == f"{reuse.KEY_PARTS['local_files']}, which the key it was recorded under holds none of: " \
                   f"{reuse.ABSENT_PARTS['local_files']}"
    assert reuse.key_differences(now, then, stored, recorded_parts=reuse.recorded_digests(now)) == [
        "how llmsweep makes one key of its parts (each part is as the key it was recorded under holds it)"]

    # a key an earlier invocation recorded for a result the run keeps: its parts stay as that one recorded them
    parts = reuse.record_parts([then])
    kept = reuse.record_parts([now, str(then)], parts)
    assert kept == {**reuse.record_parts([now]), **parts} and len(kept) == 2


def test_a_folder_holding_a_file_whose_name_is_not_utf8_is_keyed_not_a_crash(tmp_path: Path) -> None:
    """A folder a job names (a `serve.args` path) holding a file whose name is not UTF-8 (Python
    reads its byte as an escape) stopped `run` with a UnicodeEncodeError while it keyed the job. Its name counts as the
    file system holds it; a folder of UTF-8 names keeps the digest — and so the reuse keys — it had."""
    import hashlib

    from llmsweep.changes import reuse

    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "café.json").write_text("{}")
    before = hashlib.sha256("café.json\0002\0".encode() + b"{}").hexdigest()  # what keys were recorded under
    assert reuse._path_digest(folder) == before
    try:
        fd = os.open(os.fsencode(folder) + b"/\xff.bin", os.O_CREAT | os.O_WRONLY)
    except OSError:
        pytest.skip("this file system takes no name that is not UTF-8")
    os.close(fd)
    job = jobs_from_files([write_recipe(tmp_path / "r")])[0]
    job = job.model_copy(update={"serve": job.serve.model_copy(  # type: ignore[union-attr]
        update={"args": {"--generation-config": str(folder)}})})
    digest = reuse.local_files_digest(job)
    assert digest is not None and reuse._path_digest(folder) != before


def test_a_stored_result_served_by_another_simulator_build_names_the_simulator(tmp_path: Path) -> None:
    """Every edit of llmsweep's simulator (its code, a catalog file it reads) makes new keys for simulated jobs: after
    an upgrade `run --reuse` and `--resume` said 'one of what a run records only inside the key's hash: the launch,
    the simulator, the gates, ...' of each. A simulated result records the simulator build that served it
    (`provenance.simulator.digest`): where it is not this one's, the simulator is named; where it is, the simulator is
    left out of the parts that may differ."""
    from llmsweep.changes import reuse
    from llmsweep.execute.lifecycle import LifecycleSettings
    from llmsweep.sim.identity import simulator_digest

    job = jobs_from_files([write_recipe(tmp_path / "r")])[0]
    now = reuse_keys([job], simulate=True)[job.id]
    measurement = version.measurement_identity()
    older = reuse.stored_parts(job.to_json(), job.id, measurement, "0123456789abcdef")
    assert reuse.key_differences(now, "0" * 64 + now[64:], older) == [reuse.KEY_PARTS["simulator"]]
    # the same build, recorded under another gate: the simulator is not among what may differ
    same = reuse.stored_parts(job.to_json(), job.id, measurement, simulator_digest())
    timed = reuse_keys([job], simulate=True, settings=LifecycleSettings(request_timeout_s=123))[job.id]
    (said,) = reuse.key_differences(now, timed, same)
    assert said.startswith("one of what a run records only inside the key's hash: ") and \
        reuse.KEY_PARTS["gates"] in said and reuse.KEY_PARTS["simulator"] not in said, said
    # a result recorded before its build was kept: the simulator may be it
    (said,) = reuse.key_differences(now, timed, reuse.stored_parts(job.to_json(), job.id, measurement))
    assert reuse.KEY_PARTS["simulator"] in said, said


def test_a_simulated_result_against_a_job_now_on_a_real_engine_does_not_name_the_simulators_code(
        tmp_path: Path) -> None:
    """A stored simulated result (its build recorded) against the same job now served by a real engine: what differs
    is what is launched, not the simulator's code — the job now runs on no simulator, so `--reuse` and `--resume`
    named 'the simulator' as what changed."""
    from llmsweep.changes import reuse
    from llmsweep.sim.identity import simulator_digest

    recipe = write_recipe(tmp_path / "r")
    sim_job = jobs_from_files([recipe])[0]
    simulated = reuse_keys([sim_job], simulate=True)[sim_job.id]
    stored = reuse.stored_parts(sim_job.to_json(), sim_job.id, version.measurement_identity(), simulator_digest())
    recipe.write_text(recipe.read_text().replace("    engine: { name: sim }\n", ""))  # the image's SGLang now
    job = jobs_from_files([recipe])[0]
    assert job.id == sim_job.id
    real = reuse_keys([job], simulate=False)[job.id]
    said = reuse.key_differences(real, simulated, stored)
    assert said and not any(reuse.KEY_PARTS["simulator"] in s for s in said), said
    # read from the parts the simulated run recorded (run.json's reuse_parts), alike
    assert isinstance(simulated, reuse.ReuseKey) and "simulator" in simulated.parts
    said = reuse.key_differences(real, simulated, stored, recorded_parts=reuse.recorded_digests(simulated))
    assert said and not any(reuse.KEY_PARTS["simulator"] in s for s in said), said


def test_a_pythonpath_folder_is_keyed_by_every_file_under_it(tmp_path: Path) -> None:
    """Patches kept as packages (`PYTHONPATH: /opt/patches` holding `vllm/...`, a `sitecustomize.py` beside a package
    folder) and a `pip install --target` folder hold the code the server imports in subfolders: keyed by the files
    directly in the folder, one edited in place in a subfolder kept the key and `--reuse`/`--resume` stood on results
    of the old code. A `PYTHONPATH` folder is keyed by every file under it (`TREE_PATH_VARS`) but the byte-code the
    interpreter writes as it imports and dot-folders; a symbolic link looping back is walked once; a `PATH` folder
    is still looked in at its top level only."""
    from llmsweep.changes import reuse

    patches, bins = tmp_path / "patches", tmp_path / "bin"
    module = patches / "vllm" / "model_executor" / "layers" / "fused.py"
    module.parent.mkdir(parents=True)
    module.write_text("KERNEL = 'old'\n")
    (patches / "sitecustomize.py").write_text("import vllm_patch\n")
    (patches / "vllm" / "loop").symlink_to(patches, target_is_directory=True)  # a link back up: walked once
    (bins / "tools").mkdir(parents=True)
    (bins / "tools" / "helper").write_text("v1")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace(
        '      SHARED_VAR: "1"\n',
        f'      SHARED_VAR: "1"\n      PYTHONPATH: {patches}\n      PATH: {bins}:/usr/bin\n'))
    job = jobs_from_files([recipe])[0]
    for simulate in (True, False):
        before = reuse_keys([job], simulate=simulate)[job.id]
        cache = module.parent / "__pycache__"
        cache.mkdir(exist_ok=True)
        (cache / f"fused.cpython-312-{simulate}.pyc").write_bytes(b"\x00")  # written as the server imports
        (module.parent / f"stale-{simulate}.pyc").write_bytes(b"\x00")
        (patches / ".git").mkdir(exist_ok=True)
        (patches / ".git" / f"index-{simulate}").write_text("x")
        assert reuse_keys([job], simulate=simulate)[job.id] == before, f"simulate={simulate}"
        (bins / "tools" / "helper").write_text(f"v2-{simulate}")  # PATH looks in bin/, not bin/tools/
        assert reuse_keys([job], simulate=simulate)[job.id] == before, f"simulate={simulate}"
        module.write_text(f"KERNEL = 'new-{simulate}'\n")  # the patched kernel edited in place
        assert reuse_keys([job], simulate=simulate)[job.id] != before, f"simulate={simulate}"

    # a pip --target folder: its package's files by their bytes in path order within the read budget, the rest by
    # status; the same tree keyed twice gives the same digest
    target = tmp_path / "site"
    for rel, text in (("pkg/__init__.py", "A"), ("pkg/core.py", "BBBBBBBB"), ("pkg/util.py", "C"),
                      ("pkg-1.0.dist-info/RECORD", "D")):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    assert reuse._tree_files(target)[0] and [r for r, _, _ in reuse._tree_files(target)[0]] == [
        "pkg-1.0.dist-info/RECORD", "pkg/__init__.py", "pkg/core.py", "pkg/util.py"]
    assert reuse._path_digest(target, tree=True) == reuse._path_digest(target, tree=True)
    assert reuse._path_digest(target, tree=True) != reuse._path_digest(target)  # top level: no file at all


def test_a_search_path_folder_a_container_server_does_not_see_is_keyed_as_its_text(tmp_path: Path) -> None:
    """`LD_LIBRARY_PATH: /usr/local/cuda/lib64` or `PATH: /usr/local/bin` mostly exist on the planning host too, but
    a server in its job's image (docker, a Slurm pyxis step) reads the image's copy: keyed by the host's, a host
    package upgrade moved every key while it changed nothing the server ran. Where the executor serves the image
    (`Executor.image_mounts`), a search-path folder under none of its same-path mounts is keyed as its text (the
    image's reference keys what it holds); one mounted from the host (patches under `extra_mounts`) by what it holds;
    under the local executor, and for a simulated job (the simulator runs here), by what it holds, as before."""
    from llmsweep.changes import reuse

    mnt, libs, bins = tmp_path / "mnt", tmp_path / "cuda" / "lib64", tmp_path / "bin"
    patches = mnt / "patches"
    for folder in (patches, libs, bins):
        folder.mkdir(parents=True)
    (patches / "sitecustomize.py").write_text("PATCHED = 1\n")
    (libs / "libcudart.so").write_bytes(b"\x7fELF 12.4")
    (bins / "tool").write_text("v1")
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace("    engine: { name: sim }\n", "").replace(
        '      SHARED_VAR: "1"\n',
        f'      SHARED_VAR: "1"\n      PYTHONPATH: {patches}\n      LD_LIBRARY_PATH: {libs}\n      PATH: {bins}\n'))
    job = jobs_from_files([recipe])[0]
    assert job.image
    mounts = (ImageMount.same_path(tmp_path / "models"), ImageMount.same_path(mnt))

    def keys() -> dict[str, str]:
        return {"image": reuse_keys([job], simulate=False, image_mounts=mounts)[job.id],
                "host": reuse_keys([job], simulate=False, on_host=True)[job.id],
                "unsaid": reuse_keys([job], simulate=False)[job.id],
                "simulated": reuse_keys([job], simulate=True, image_mounts=mounts)[job.id]}

    before = keys()
    (libs / "libcudart.so").write_bytes(b"\x7fELF 12.8")  # a host upgrade: the image's copy is as it was
    (bins / "tool").write_text("v2")
    after = keys()
    assert after["image"] == before["image"]
    assert all(after[k] != before[k] for k in ("host", "unsaid", "simulated")), (before, after)
    (patches / "sitecustomize.py").write_text("PATCHED = 2\n")  # mounted from the host: what the server imports
    assert all(v != after[k] for k, v in keys().items())
    # no search-path folder mounted: no local-files part at all, the key of a job naming no local path
    assert reuse.local_files_digest(job, image_mounts=(ImageMount.same_path(tmp_path / "models"),)) is None
    assert reuse.local_files_digest(job, image_mounts=(ImageMount.same_path(patches),)) is not None  # the folder
    assert reuse.local_files_digest(job) is not None


def test_each_executor_says_which_host_folders_its_image_servers_see(tmp_path: Path) -> None:
    """The reuse key reads a search-path folder only where the server reads this host's copy: the docker executor's
    mounts (`hf_cache`, `model_dir` at their own path, `extra_mounts` where they say), a Slurm pyxis step's (and the
    home folder with `container_mount_home`); the local executor serves on this host (None), as does a Slurm
    node starting the server as a plain process (`node.use_srun: false`)."""
    import llmsweep.execute.registry  # noqa: F401  (registers every built-in executor)
    from llmsweep.execute.executor import registered_executors

    models, patches, scratch = tmp_path / "models", tmp_path / "patches", tmp_path / "scratch"
    for folder in (models, patches, scratch):
        folder.mkdir()
    executors = registered_executors()
    assert executors["local"]().image_mounts() is None
    docker = executors["docker"]({"model_dir": str(models),
                                  "extra_mounts": [f"{patches}:{patches}:ro", f"{scratch}:/scratch", "cache:/c"]})
    assert docker.image_mounts() == (ImageMount.same_path(models), ImageMount.same_path(patches),
                                     ImageMount(scratch, Path("/scratch")))  # a named volume's: no host folder
    slurm = executors["slurm"]({"node": {"hf_cache": str(models), "extra_mounts": [f"{patches}:{patches}"],
                                         "container_mount_home": True}})
    assert slurm.image_mounts() == (ImageMount.same_path(models), ImageMount.same_path(patches),
                                    ImageMount.same_path(Path.home()))
    assert executors["slurm"]({"node": {"use_srun": False}}).image_mounts() is None


@pytest.mark.parametrize("kind", ["docker", "slurm"])
def test_a_search_path_folder_mounted_elsewhere_is_keyed_by_its_hosts_source(tmp_path: Path, kind: str) -> None:
    """`PYTHONPATH: /opt/patches` with the patches mounted from another host folder (docker's `extra_mounts:
    [/host/patches:/opt/patches]`, a pyxis step's `container-mounts`) was keyed as its text: the server imports
    /host/patches, and patches edited there kept the key, so `--reuse` stood on results of the old ones. Such a word
    is keyed through its mount's source: an edit there moves the key, one to a folder this host happens to hold at
    the container's path does not (the server never reads it); a deeper mount inside it is read from its own."""
    import llmsweep.execute.registry  # noqa: F401  (registers every built-in executor)
    from llmsweep.execute.executor import registered_executors

    source, fixes, seen = tmp_path / "host" / "patches", tmp_path / "host" / "fixes", tmp_path / "opt" / "patches"
    for folder in (source / "vllm", fixes, seen):
        folder.mkdir(parents=True)
    (source / "vllm" / "sched.py").write_text("PATCH = 1\n")
    (fixes / "fix.py").write_text("FIX = 1\n")
    (seen / "sitecustomize.py").write_text("HOST_ONLY = 1\n")  # this host's own folder at the container's path
    recipe = write_recipe(tmp_path / "r")
    recipe.write_text(recipe.read_text().replace("    engine: { name: sim }\n", "").replace(
        '      SHARED_VAR: "1"\n', f'      SHARED_VAR: "1"\n      PYTHONPATH: {seen}\n'))
    job = jobs_from_files([recipe])[0]
    specs = [f"{source}:{seen}:ro", f"{fixes}:{seen}/fixes"]
    options = {"extra_mounts": specs} if kind == "docker" else {"node": {"extra_mounts": specs}}
    mounts = registered_executors()[kind](options).image_mounts()
    assert mounts is not None

    def key() -> str:
        return reuse_keys([job], simulate=False, image_mounts=mounts)[job.id]

    before = key()
    (seen / "sitecustomize.py").write_text("HOST_ONLY = 2\n")  # not what the container reads there
    assert key() == before
    (source / "vllm" / "sched.py").write_text("PATCH = 2\n")  # the patches the server imports, edited on the host
    patched = key()
    assert patched != before
    (fixes / "fix.py").write_text("FIX = 2\n")  # mounted inside the patches' mount: its tree, from its own source
    assert key() != patched
