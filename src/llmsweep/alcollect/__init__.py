"""Golden acceptance-length collection (`llmsweep al collect`): a curve measured on a served model.

Modules (import the one you need; this package imports none of them, so the CLI builds its options cheaply):
    settings   CollectSettings (sampling per thinking mode), Sampling, CellResult, CollectResult, DEFAULT_KWARGS
    prompts    load_prompts(source, category, limit) -> PromptSet   SPEED-Bench rows: hub, a JSONL file, or builtin
    collect    collection_job(jobs, simulate=...) -> Job; curve_file_name(job, variant) -> str;
               collect_curve(job, settings, prompts, run_dir, out, launcher=..., simulate=..., event=..., merge=...)
    merge      Collected, differences(old, new, fields) -> [what differs], merge(old, new) -> Merged   (--merge-into)
    modes      plan_modes(modes, references=...) -> {mode: ModeSettings} (sampling and kwargs per thinking mode, and
               where each came from); thinking_switch(job, on, off, references) -> ThinkingSwitch
"""
