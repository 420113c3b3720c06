"""Accuracy evaluations of a served model with lm-eval (InferenceX's `run_eval`, typed).

An `eval-only` job starts its server at the eval context length (:mod:`.context`, rendered by the engine adapter) and
runs only the eval; a `run-eval` job runs its throughput point and then the eval against the same server. The eval is
`python -m lm_eval --model local-chat-completions --apply_chat_template` in its own environment (`LLMSWEEP_LM_EVAL`,
:mod:`.harness`) on a packaged task file (:mod:`.tasks`: GSM8K 5-shot by default, GPQA-diamond selectable, either
pointed at a local file in the same format), once per eval concurrency. Every `exact_match,*` metric is held against
the catalog's threshold for the model prefix (:mod:`.gate`); the result becomes the summary's typed `eval` block
(:mod:`.results`), read back from the files lm-eval wrote.
"""

from __future__ import annotations
