"""The pull-request verdict as Markdown: per point improvement / regression / no change / unverified, and the success
rate."""

from __future__ import annotations

from collections.abc import Collection

from llmsweep.metrics.registry import HOT_BY_NAME
from llmsweep.report.markdown import VERDICT_MARK, _row, delta_cell, not_compared, side_heading, verdict_legend
from llmsweep.results.compare import Comparison, apart_words
from llmsweep.results.verdict import (
    POINT_VERDICT_MEANING,
    SuccessRate,
    point_verdict,
    reused_from_baseline,
    uncalled_why,
    verdict_counts,
)
from llmsweep.words import count_of, noun

ORDER = {"regression": 0, "improvement": 1, "unverified": 2, "no change": 3}
"""Where a point's verdict puts it in the table: what needs a reader's eye first."""


def verdict_markdown(comp: Comparison, success: SuccessRate,
                     metrics: tuple[str, ...] = ("tput_per_gpu", "p90_e2e_norm_intvty", "p90_ttft"),
                     reused: Collection[str] = ()) -> str:
    """`reused`: the stored result ids the run under test stood jobs on (`run --reuse`): those baseline points are
    listed as reused, not as points the run did not have. Each point's verdict is `results.verdict.point_verdict`'s,
    as `--json`'s `verdict.points` gives it, with its why (`uncalled_why`); a legend under the table says what each
    verdict shown means (`POINT_VERDICT_MEANING`)."""
    counts = verdict_counts(comp)
    rate = "–" if success.rate is None else f"{success.rate:.1%}"
    lines = [f"## llmsweep verdict: {side_heading(comp, 'b')} against baseline {side_heading(comp, 'a')}", "",
             f"**{count_of(counts['regression'], 'regression')}, {count_of(counts['improvement'], 'improvement')}, "
             f"{counts['no change']} without change, {counts['unverified']} unverified** over "
             f"{count_of(len(comp.matched), 'matched point')}"
             # A's valid points B ran without a result: regressions too, which the gate fails on (`lost_by_b`)
             + (f", and **{count_of(len(comp.lost), 'point')} lost** (B ran {noun(len(comp.lost), 'it', 'them')} "
                "without a result: each a regression, named "
                "in the note below)" if comp.lost else "")
             + (f", **{count_of(len(comp.skipped), 'result')} not compared** (listed below)" if comp.skipped
                else "") + ". "
             f"Sweep success rate: **{rate}** ({success.success}/{success.total} {noun(success.total, 'job')}).", ""]
    lines += [f"> {n}" for n in comp.notes]
    head = ["Point", "Verdict", *(HOT_BY_NAME[m].header for m in metrics)]
    if comp.matched:  # no empty table: the notes say why nothing matched
        lines += ["", _row(head), _row(["---"] * len(head))]
    for pc in sorted(comp.matched, key=lambda p: (ORDER[point_verdict(p)], p.order)):
        # why it says no more, and what served the sides apart (another engine build, power limit): beside it
        why = "; ".join(x for x in (uncalled_why(pc), apart_words(pc.served_apart) if pc.served_apart else "") if x)
        verdict = VERDICT_MARK[point_verdict(pc)] + (f" ({why})" if why else "")
        by = {d.metric: d for d in pc.deltas}
        cells = [pc.label, verdict]
        for m in metrics:
            d = by.get(m)
            cells.append("–" if d is None else f"{HOT_BY_NAME[m].cell(d.b)}: {delta_cell(d)}")
        lines.append(_row(cells))
    if legend := verdict_legend(POINT_VERDICT_MEANING, map(point_verdict, comp.matched)):
        lines += ["", f"_Verdicts:_ {legend}"]
    if len(success.by_hardware) > 1 or success.total != success.success:
        lines += ["", _row(["Hardware", "Successful", "Jobs"]), _row(["---"] * 3)]
        lines += [_row([h, s, t]) for h, (s, t) in success.by_hardware.items()]
    taken, only_a = reused_from_baseline(comp, reused)
    for title, pts in (("Reused from the baseline, not measured again", taken), ("Only in the baseline", only_a),
                       ("New points", comp.only_b)):
        if pts:
            lines += ["", f"**{title}:** " + ", ".join(f"`{p.job_id}`" for p in pts)]
    lines += not_compared(comp)  # matched, but left out of the verdict: never dropped unsaid
    return "\n".join(lines) + "\n"
