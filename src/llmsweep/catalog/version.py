"""Engine versions as they appear in image tags and release notes, ordered so a gate can say "needs >= 0.5.16".

Tags spell versions loosely (``v0.5.12.post1``, ``1.2.0rc6``, ``atom0.1.2.post``, ``0.11.0.dev3``); this small type
covers exactly that grammar (PEP 440's release/pre/post/dev subset) without pulling in another dependency.
Ordering: ``1.0.dev1 < 1.0a1 < 1.0b1 < 1.0rc1 < 1.0 < 1.0.post1``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from llmsweep.errors import ConfigError

_VERSION = re.compile(
    r"""^v?(?P<release>\d+(?:\.\d+)*)
        (?:[-_.]?(?P<pre>a|alpha|b|beta|rc|c)[-_.]?(?P<pre_n>\d+)?)?
        (?:[-_.]?(?P<post>post|rev|r)[-_.]?(?P<post_n>\d+)?)?
        (?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>\d+)?)?$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "rc": 2, "c": 2}
_PRE_NAME = {0: "a", 1: "b", 2: "rc"}


@functools.total_ordering
@dataclass(frozen=True, slots=True)
class Version:
    """A comparable engine version: release numbers plus optional pre-release, post-release and dev parts."""

    release: tuple[int, ...]
    pre: tuple[int, int] | None = None  # (rank a=0 b=1 rc=2, number)
    post: int | None = None
    dev: int | None = None

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``0.5.16``, ``v0.5.12.post1``, ``1.2.0rc6``, ``0.1.2.post``; a ConfigError says what is accepted."""
        found = cls.try_parse(text)
        if found is None:
            raise ConfigError(
                f"{text!r} is not a version",
                fix="write it like 0.5.16, v0.5.12.post1, 1.2.0rc6 or 0.11.0.dev3",
            )
        return found

    @classmethod
    def try_parse(cls, text: str) -> Version | None:
        m = _VERSION.match(text.strip())
        if not m:
            return None
        release = tuple(int(p) for p in m.group("release").split("."))
        pre = None
        if m.group("pre"):
            pre = (_PRE_RANK[m.group("pre").lower()], int(m.group("pre_n") or 0))
        post = int(m.group("post_n") or 0) if m.group("post") else None
        dev = int(m.group("dev_n") or 0) if m.group("dev") else None
        return cls(release, pre, post, dev)

    def below(self, bound: Version) -> bool:
        """Whether this version comes before a range's lower `bound`: compared on the release (`0.26.0rc1` is
        0.26.0) unless the bound itself names a pre-, post- or dev-release (`1.3.0rc14`: `1.3.0rc5` comes before it,
        where comparing releases alone let it pass)."""
        return self < bound if bound.exact else self.base < bound.base

    def above(self, bound: Version) -> bool:
        """Whether this version comes after a range's upper `bound`, as :meth:`below` compares."""
        return self > bound if bound.exact else self.base > bound.base

    @property
    def exact(self) -> bool:
        """Whether it names more than a release (a pre-, post- or dev-release)."""
        return self.pre is not None or self.post is not None or self.dev is not None

    @property
    def base(self) -> Version:
        """The release without pre/post/dev parts (``0.5.12.post1`` -> ``0.5.12``)."""
        return Version(self.release)

    def _key(self) -> tuple[Any, ...]:
        release = self.release
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]  # 0.5 == 0.5.0
        if self.pre is None and self.post is None and self.dev is not None:
            pre: tuple[float, int] = (-1, 0)  # 1.0.dev1 sorts before 1.0a1
        elif self.pre is None:
            pre = (float("inf"), 0)
        else:
            pre = self.pre
        post = -1 if self.post is None else self.post
        dev = float("inf") if self.dev is None else self.dev
        return (release, pre, post, dev)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = ".".join(str(p) for p in self.release)
        if self.pre is not None:
            text += f"{_PRE_NAME[self.pre[0]]}{self.pre[1]}"
        if self.post is not None:
            text += f".post{self.post}"
        if self.dev is not None:
            text += f".dev{self.dev}"
        return text

    def __repr__(self) -> str:
        return f"Version('{self}')"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """Pydantic fields of type Version accept a string (or Version) and serialise back to the string."""

        def validate(value: Any) -> Version:
            if isinstance(value, Version):
                return value
            if isinstance(value, (int, float)):
                value = str(value)
            if not isinstance(value, str):
                raise ValueError("a version must be a string like '0.5.16'")
            found = cls.try_parse(value)
            if found is None:
                raise ValueError(f"{value!r} is not a version like 0.5.16, 0.5.12.post1 or 1.2.0rc6")
            return found

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(str),
            json_schema_input_schema=core_schema.str_schema(),
        )


def as_version(value: Version | str | None) -> Version | None:
    """Version from a Version, a string, or None (unknown stays None; an unparsable string is unknown too)."""
    if value is None or isinstance(value, Version):
        return value
    return Version.try_parse(value)


def same_version(a: str, b: str) -> bool:
    """Whether two engine version strings name one release (`0.26` and `0.26.0` do; a local build tag differs)."""
    va, vb = Version.try_parse(a), Version.try_parse(b)
    return va == vb if va is not None and vb is not None else a.strip() == b.strip()
