"""Entry point of the record helper process: `python -m llmsweep.client._record_helper SPEC-JSON` (see recorder.py)."""

from __future__ import annotations

import json
import sys

from llmsweep.client.recorder import helper_main

if __name__ == "__main__":
    helper_main(json.loads(sys.argv[1]))
