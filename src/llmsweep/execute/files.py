"""The names of a job folder's own files (the executor's, beside the client's in `client.files`), light to import:
the results and the report read job folders without loading the executors (`execute.artifacts` re-exports these
with the writers)."""

from __future__ import annotations

JOB_FILE = "job.json"
"""The planned job as it ran (`plan.Job`)."""
COMMAND_FILE = "server_command.txt"
"""The server's command line, secrets scrubbed."""
OUTCOME_FILE = "outcome.json"
"""How the job ended (`lifecycle.JobOutcome`)."""
