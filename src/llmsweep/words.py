"""How a message says a count of things: `1 GPU`, `8 GPUs`, `0 jobs` — never `GPU(s)`.

One home for the wording, below every room: the dashboard's `1 GPU` / `8 GPUs` (`report.data.served_on`) and every
message that counts GPUs, nodes, workers, jobs or points say it alike. A noun whose plural is not its singular plus
`s` names the plural (`count_of(n, "process", "processes")`), and a verb or pronoun that agrees with a count is
chosen the same way (`noun(n, "was", "were")`, `noun(n, "it", "them")`). The dashboard's script
(`report/assets/dashboard.js`) says its counts with a `countOf` / `noun` of the same rule."""

from __future__ import annotations


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """`singular` for one thing, else its plural (`GPU`, `GPUs`; `0 GPUs`): the word alone, for a message that
    lists the things after it (`GPUs 0, 1`)."""
    return singular if n == 1 else (plural if plural is not None else f"{singular}s")


def count_of(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and its noun: `1 GPU`, `8 GPUs`, `0 jobs`."""
    return f"{n} {noun(n, singular, plural)}"
