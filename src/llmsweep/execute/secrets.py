"""Secret values reach the server process but never anything written down.

Engines echo their environment and arguments into logs (vLLM prints its args, some images print `env`), so the log
writer and every artifact writer pass text through a :class:`SecretScrubber` built from the values of the
`LaunchSpec.secret_env` names in the caller's environment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

MASK = "***"
# A partial secret held back at the end of a stream is masked at flush when it is at least this long: shorter
# fragments are far more likely ordinary text that happens to begin a secret than a leak worth hiding.
_MIN_FRAGMENT_TO_MASK = 3


def collect_secrets(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Values of the named secrets present in `environ` (default: this process's environment).

    A missing secret is not an error here (a public model needs no HF_TOKEN); it is logged so a later 401 is
    explained.
    """
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name in names:
        value = env.get(name)
        if value:
            found[name] = value
        else:
            log.warning("secret %s is not set in the environment; the server starts without it", name)
    return found


class SecretScrubber:
    """Replaces every occurrence of each secret value with `***` in text or bytes."""

    def __init__(self, values: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is masked whole.
        unique = {v for v in values if v}
        self._values: tuple[str, ...] = tuple(sorted(unique, key=len, reverse=True))
        self._raw: tuple[bytes, ...] = tuple(v.encode() for v in self._values)

    @property
    def active(self) -> bool:
        return bool(self._values)

    def scrub(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, MASK)
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        for value in self._raw:
            data = data.replace(value, MASK.encode())
        return data

    def write_text(self, path: Path, text: str) -> Path:
        """Write `text` to `path` scrubbed: the one way artifact writers should put text on disk."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.scrub(text), encoding="utf-8")
        return path

    def stream(self) -> StreamScrubber:
        return StreamScrubber(self._raw)


class StreamScrubber:
    """Scrubs a byte stream that arrives in arbitrary chunks.

    A secret may be split across two reads; the scrubber holds back only the shortest tail that could still grow into
    a secret, so ordinary output (a ready marker) is never delayed.
    """

    def __init__(self, secrets: tuple[bytes, ...]) -> None:
        self._secrets = secrets
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self._secrets:
            return chunk
        buf = self._held + chunk
        for value in self._secrets:
            buf = buf.replace(value, MASK.encode())
        hold = self._partial_tail(buf)
        self._held = buf[len(buf) - hold :] if hold else b""
        return buf[: len(buf) - hold]

    def flush(self) -> bytes:
        """The held-back tail at end of stream; masked when it is a long enough prefix of a secret."""
        held, self._held = self._held, b""
        if len(held) >= _MIN_FRAGMENT_TO_MASK:
            return MASK.encode()
        return held

    def _partial_tail(self, buf: bytes) -> int:
        longest = 0
        for value in self._secrets:
            for size in range(min(len(value) - 1, len(buf)), longest, -1):
                if buf.endswith(value[:size]):
                    longest = size
                    break
        return longest
