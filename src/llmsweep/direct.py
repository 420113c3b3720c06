"""HTTP to the servers a run launched (their health, `/version`, `/metrics`, the simulator's `/power`): direct, never
through a proxy."""

from __future__ import annotations

import urllib.request

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Every request to a server this run launched goes direct: with HTTP_PROXY set (a CI box, a cluster login node),
plain `urlopen` would send the health check, the `/version` read-back or a power reading to the proxy."""
