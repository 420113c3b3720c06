"""Assemble the self-contained `index.html`: template + inlined CSS and JS + the payload as embedded JSON.

No CDN, no fetch: the page opens from file:// on an air-gapped laptop. The payload sits in a
`<script type="application/json">` block with `<`, `>` and `&` escaped, so no artifact text can close the tag.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib import resources
from typing import Any

from llmsweep.jsonline import finite_or_null


@cache
def asset(name: str) -> str:
    """Text of a file in `llmsweep/report/assets/` (packaged as package data)."""
    return resources.files("llmsweep.report").joinpath("assets", name).read_text(encoding="utf-8")


def embed_json(payload: Any) -> str:
    text = json.dumps(finite_or_null(payload), separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render_html(payload: dict[str, Any], title: str) -> str:
    page = asset("template.html")
    # Replace the data last so nothing inside it is ever mistaken for a placeholder.
    page = page.replace("__TITLE__", html.escape(title)).replace("__CSS__", asset("dashboard.css"))
    page = page.replace("__JS__", asset("dashboard.js"))
    return page.replace("__DATA__", embed_json(payload))
