"""The files the client writes into its output folder (a `bench … --out` folder, a job folder of `run`), named once:
the execution layer (`execute.artifacts`), the predictor and the readers take the names from here. A light module:
importing it loads nothing of the client's HTTP machinery."""

from __future__ import annotations

RECORDS_FILE = "records.jsonl"
"""One request per line (`records.RequestRecord`)."""
SERVER_METRICS_FILE = "server_metrics.jsonl"
"""The server's metrics, one scrape per line (`scrape.scrape_line`)."""
RUN_FILE = "run.json"
"""What served the records and how they are judged: source, provenance (clock included), gates, the client's workers
(`runner.run_json`)."""
SUMMARY_FILE = "summary.json"
"""The summary of the records (`metrics.model.Summary`)."""
