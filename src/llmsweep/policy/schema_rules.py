"""The recipe loader's rules (they run in `llmsweep.spec`), listed so `llmsweep rules` shows every rule.

The loader does not expose a rule table, so the ids are kept here; a unit test scans the spec sources and fails when
a rule id appears there that is missing from this list.
"""

from __future__ import annotations

from llmsweep.findings import Severity
from llmsweep.policy.registry import Rule, register
from llmsweep.spec.scope import UNWEIGHED_RULE

E, W = Severity.ERROR, Severity.WARNING
AGENTX = "InferenceX validation.py / agentx-spec §1.1 (AgentX master-config rules)"

SCHEMA_RULES: tuple[tuple[str, Severity, str, str, str | None], ...] = (
    ("schema.file", E, "Input file does not exist", "check the path", None),
    ("schema.yaml-syntax", E, "The file is not valid YAML (or not UTF-8)", "fix the YAML at the named line", None),
    ("schema.yaml-limits", E, "The file nests too deep or expands too far through aliases (an alias bomb)",
     "write the recipe out plainly", None),
    ("schema.duplicate-key", E, "A key is written twice in one mapping (YAML keeps the last silently)",
     "delete or rename one of them", None),
    ("schema.nul", E, "A key or value holds a NUL character (a `\\0` escape): no command line, environment "
     "variable or file name can carry one", "delete the `\\0` escape", None),
    ("schema.empty-file", W, "The file holds no recipes", "add a recipe key or delete the file", None),
    ("schema.not-recipe", W, "The file is another kind (a runner file, a golden-AL curve), or a folder walked is a "
     "discovery's output (its proposal keeps the recipe's keys): skipped, named",
     "pass a runner file with --runner-config; name a proposed.yaml to read it", None),
    ("schema.not-mapping", E, "A file or recipe is not a mapping", "indent fields under the recipe key", None),
    ("schema.blank-key", E, "An empty or whitespace-only recipe key (`\"\":`): nothing could name the recipe",
     "name the recipe", None),
    ("schema.wildcard-key", E, "`*` in a recipe key (reserved for --config-keys patterns)", "rename the key", None),
    ("schema.duplicate-recipe", E, "A recipe key is defined in two files", "rename one of them", None),
    ("schema.unknown-key", E, "Unknown key (with a did-you-mean)", "rename or delete it", None),
    ("schema.missing", E, "A required field is missing", "add the field", None),
    ("schema.type", E, "A field has the wrong type", "write a value of the expected type", None),
    ("schema.enum", E, "A value outside the allowed set", "use one of the listed values", None),
    ("schema.range", E, "A number outside its allowed range", "use a value in the range", None),
    ("schema.invalid", E, "A value pydantic rejects for another reason", "correct the value", None),
    ("schema.agentic-runner", E, "Agentic recipes run on an exact `cluster:<name>` fleet label",
     "use the exact fleet label, e.g. `runner: cluster:mi300x-amds`", AGENTX),
    ("schema.agentic-topology", E, "Agentic entries use `tp` (single node) or `prefill`+`decode` (multinode)",
     "write `tp:` or both worker blocks", AGENTX),
    ("schema.kv-offloading-required", E, "Single-node agentic entries state kv-offloading",
     "add `kv-offloading: none` or `dram` with a backend", AGENTX),
    ("schema.kv-offload-backend", E, "kv-offload-backend is set iff kv-offloading is dram",
     "add or delete `kv-offload-backend`", AGENTX),
    ("schema.dram-utilization-required", E, "A dram arm needs dram-utilization", "add `dram-utilization: 0.80`",
     "InferenceX spec §2.4"),
    ("schema.component-scope", E, "router / kv-p2p-transfer at the top level or in entries, not both",
     "keep one scope", AGENTX),
    ("schema.p2p-multinode", E, "kv-p2p-transfer only on multinode recipes", "delete it", AGENTX),
    ("schema.disagg-p2p", E, "disagg requires kv-p2p-transfer", "add `kv-p2p-transfer:`", AGENTX),
    ("schema.disagg-multinode", E, "disagg requires multinode", "set `multinode: true`", AGENTX),
    ("schema.multinode-fields", E, "Multinode agentic entries put pp/dcp/pcp in worker blocks",
     "move them into prefill/decode", AGENTX),
    ("schema.worker-hardware", E, "Prefill and decode worker hardware are set together", "set both or neither",
     AGENTX),
    ("schema.component-version", E, "Component metadata needs a version", "add `version:`", AGENTX),
    ("schema.conc-both", E, "conc-list and conc-start/conc-end are exclusive", "keep one form",
     "InferenceX validation.py"),
    ("schema.conc-missing", E, "A concurrency list or range is required", "add `conc-list:`",
     "InferenceX validation.py"),
    ("schema.conc-positive", E, "Concurrencies are positive", "use values > 0", "InferenceX validation.py"),
    ("schema.conc-range", E, "conc-start <= conc-end", "swap them", "InferenceX validation.py"),
    ("schema.dcp-divisibility", E, "tp is divisible by dcp-size", "pick a divisor of tp",
     "InferenceX validation.py"),
    ("schema.scenario-empty", E, "At least one scenario", "add a scenario", "InferenceX validation.py"),
    ("schema.override-when", E, "An override `when` that can never match", "use a listed value", None),
    ("schema.serve-flag", E, "An engine argument that is not a flag", "write `--flag`", None),
    ("schema.argv-value", E, "A value the launch writes as a word of the engine's command line (the model, "
     "model-path, load-format, draft-model, served-model-name, a flag's value) begins with `-`: the engine would "
     "read it as a flag", "write the value without the leading `-` (a path as `./-name`)", None),
    ("schema.env-name", E, "An environment variable name that is not `[A-Za-z_][A-Za-z0-9_]*` (it reaches shells)",
     "rename the variable", None),
    ("schema.secret-arg", E, "A credential written as an engine argument (`--api-key`, `--hf-token`, an `hf_…` value)",
     "list the variable under `serve.secret-env` instead", "DESIGN.md principle 2 (secrets are never written down)"),
    ("schema.image", E, "An empty, malformed or untagged image", "pin the image as `registry/path:tag`", None),
    ("schema.precision", E, "A precision that names no weight format (`fp9`)",
     "write the served checkpoint's format (the message suggests the closest)",
     "the simulator served an unknown precision as bf16 under its label"),
    ("schema.secret-in-env", E, "A secret-env name with a value written in env", "delete the value", None),
    ("schema.num-prompts", E, "num-prompts and num-prompts-per-conc are exclusive", "keep one", None),
    ("schema.trace-source", E, "A trace source names exactly one of hf, path, synthetic", "keep one", None),
    ("schema.replay", E, "traces (the agentic corpus) and replay (a Mooncake trace) are exclusive", "keep one", None),
    ("spec.not-runnable", W, "No `serve` block: plannable (matrix) only, not runnable",
     "add a `serve` block with the engine launch", None),
    ("spec.unknown-engine", W, "The framework maps to no engine adapter", "set `serve.engine.name`", None),
)
PLAN_RULES: tuple[tuple[str, Severity, str, str, str | None], ...] = (
    ("plan.override-unused", W, "A serve override that matches no job", "check its `when` values", None),
    ("plan.failed", E, "The recipe cannot be expanded into jobs (topology, runner or DRAM metadata)",
     "fix the field named in the message", "InferenceX generate_sweep_configs.py"),
    ("plan.no-jobs", E, "An input that plans no job: a file with no recipe (empty, a directory) or a recipe whose "
     "search spaces are empty", "give it at least one search-space entry with a concurrency", None),
    (UNWEIGHED_RULE, W, "A file or recipe of the recipes/ folder the planned files belong to that does not "
     "load or plan: their eval rows were chosen without it (spec.scope.Matrix)", "fix it", None),
)
INPUT_RULES: tuple[tuple[str, Severity, str, str, str | None], ...] = (
    ("fleet.invalid", E, "A runner file (--runner-config) that does not read as a fleet", "fix the field named",
     None),
    ("catalog.file", E, "A catalog file the jobs read (power.yaml, sim_calibration.yaml, eval_thresholds.yaml: "
     "packaged or under $LLMSWEEP_CATALOG_DIR) that does not read", "fix the file, line and field named", None),
    ("eval.input", E, "An eval input besides the server (an --eval-dataset) the eval cannot run on",
     "pass a dataset the eval's task reads", None),
    ("policy.input", E, "An input a policy rule reads is bad, so the rules named could not check the recipes",
     "fix the input named", None),
    ("policy.internal", E, "A policy rule crashed (an llmsweep bug): what it checks is unchecked",
     "report the bug with the recipe and the logged traceback", None),
)
"""What the jobs read besides their recipes (`policy.inputs`, the runner file), checked before any job: listed so
`llmsweep rules` shows every rule a finding can name."""
CHANGELOG_RULES: tuple[tuple[str, Severity, str, str, str | None], ...] = (
    ("changelog.bytes", E, "A line of the changelog holds what InferenceX's CI refuses (bytes that are not UTF-8, "
     "a byte-order mark, a tab, a carriage return, a NUL)", "save as plain UTF-8 text", None),
    ("changelog.final-newline", E, "The changelog does not end with a newline", "end the last line with one", None),
    ("changelog.yaml-syntax", E, "The changelog is not valid YAML", "fix the YAML at the named line", None),
    ("changelog.duplicate-key", E, "A key written twice in one entry, or a config key listed twice",
     "delete one of them", None),
    ("changelog.not-list", E, "The changelog is not a YAML list of entries", "start each entry with `- config-keys:`",
     None),
    ("changelog.entry-lines", E, "An entry that does not begin with `- config-keys:` at column 0",
     "begin every entry so", None),
    ("changelog.not-mapping", E, "An entry that is not a mapping", "indent its fields under the entry", None),
    ("changelog.duplicate-entry", W, "An added entry repeats an earlier one (same keys, description and flags)",
     "say what this run changes, or drop the entry", None),
    ("changelog.unknown-key", E, "An unknown field of an entry, or a config key (or pattern) no recipe has",
     "rename or delete it (see `llmsweep matrix` for the recipe keys)", "InferenceX process_changelog.py"),
    ("changelog.missing", E, "An entry lacks a required field", "add the field", None),
    ("changelog.type", E, "An entry's field has the wrong type", "write a value of the expected type", None),
    ("changelog.enum", E, "An entry's value outside the allowed set", "use one of the listed values", None),
    ("changelog.range", E, "An entry's value outside its allowed range", "use a value in the range", None),
    ("changelog.invalid", E, "An entry's value rejected for another reason", "correct the value", None),
    ("changelog.pr-link", E, "An added entry's pr-link is not its pull request's InferenceX link (or `XXX` left in)",
     "write the link (`llmsweep changelog canonicalize` does it)", "InferenceX process_changelog.py"),
    ("changelog.append-only", E, "append-only combined with eval fields (it selects no eval)",
     "drop one of them", None),
    ("changelog.history", E, "Lines of the base changelog deleted, changed or inserted into (history is "
     "append-only; only a pr-link correction in InferenceX's form may rewrite a line)",
     "restore the base's lines and add new entries at the end", "InferenceX process_changelog.py"),
    ("changelog.separator", E, "Appended entries not separated from the base and each other by exactly one blank "
     "line", "leave one empty line between entries", "InferenceX process_changelog.py"),
    ("changelog.appended-yaml", E, "The appended lines are not YAML on their own (InferenceX's CI reads only them)",
     "write the new entries in full, without aliases to earlier anchors", "InferenceX process_changelog.py"),
)
"""The rules a finding of `llmsweep changelog` can name (`changes.changelog`, which renames the field errors of an
entry from `schema.*` to `changelog.*`): listed so `llmsweep rules` shows them."""

for _id, _sev, _title, _fix, _evidence in SCHEMA_RULES:
    register(Rule(_id, _sev, _title, _fix, _evidence, "schema"))
for _id, _sev, _title, _fix, _evidence in PLAN_RULES:
    register(Rule(_id, _sev, _title, _fix, _evidence, "plan"))
for _id, _sev, _title, _fix, _evidence in INPUT_RULES:
    register(Rule(_id, _sev, _title, _fix, _evidence, "plan"))
for _id, _sev, _title, _fix, _evidence in CHANGELOG_RULES:
    register(Rule(_id, _sev, _title, _fix, _evidence, "changelog"))
