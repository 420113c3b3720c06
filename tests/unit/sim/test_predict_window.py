"""`predict_point(on_progress=...)`: how far a point's window is, for `run`'s display of a job in virtual time — a
read at each scrape that changes nothing of the prediction."""

from __future__ import annotations

from pathlib import Path

from llmsweep import engines
from llmsweep.plan import jobs_from_files
from llmsweep.plan.point import Point
from llmsweep.sim.predict import WindowProgress, predict_point
from llmsweep.sim.serve_args import engine_config_from_argv

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def _predict(recipe: str, seen: list[WindowProgress] | None) -> tuple[Point, list[dict[str, object]]]:
    (job, *_) = sorted(jobs_from_files([RUN / recipe]), key=lambda j: j.concs[0])
    point = Point.of(job)
    config = engine_config_from_argv(engines.render(job, simulate=True).argv)
    predicted = predict_point(point, config, summarize=False, on_progress=None if seen is None else seen.append)
    return point, predicted.records


def test_the_window_is_reported_from_warm_up_to_its_end_and_the_records_do_not_change() -> None:
    seen: list[WindowProgress] = []
    _, records = _predict("agentic-sim.yaml", seen)
    assert seen and seen[0].elapsed_s is None  # the warm-up first
    fractions = [w.fraction() for w in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert seen[-1].elapsed_s == seen[-1].window_s
    assert records == _predict("agentic-sim.yaml", None)[1]


def test_a_fixed_length_point_reports_its_requests() -> None:
    seen: list[WindowProgress] = []
    point, _ = _predict("fixed-sim.yaml", seen)
    last = seen[-1]
    assert not last.timed() and last.to_send == point.load.num_requests and last.sent == last.to_send
    assert last.fraction() == 1.0


def test_a_predicted_points_files_are_written_in_the_clients_encoding(tmp_path: Path) -> None:
    """`run` in virtual time and `predict --out` write each record as the client writes it (compact: the line
    `metrics.accumulate` reads without decoding its chunk arrays) and each scrape as the client's scraper does; read
    back, the files hold the prediction."""
    import json

    from llmsweep.client.files import RECORDS_FILE, SERVER_METRICS_FILE
    from llmsweep.client.records import RequestRecord

    (job, *_) = sorted(jobs_from_files([RUN / "agentic-sim.yaml"]), key=lambda j: j.concs[0])
    config = engine_config_from_argv(engines.render(job, simulate=True).argv)
    predicted = predict_point(Point.of(job), config, summarize=False)
    predicted.write_streams(tmp_path)
    lines = (tmp_path / RECORDS_FILE).read_bytes().splitlines(keepends=True)
    assert len(lines) == len(predicted.records) > 10
    assert [json.loads(line) for line in lines] == predicted.records
    for line in lines:
        assert RequestRecord.from_dict(json.loads(line)).to_line() == line  # the client's bytes, not just its fields
        assert b'"chunk_times":[' in line
    scrapes = (tmp_path / SERVER_METRICS_FILE).read_text().splitlines()
    assert [json.loads(s) for s in scrapes] == predicted.scrapes and len(scrapes) >= 8  # one a second, 8 s window
    assert all(s.startswith('{"t":') for s in scrapes)


def test_a_fixed_length_point_cut_short_is_smoke_not_valid() -> None:
    """`predict --duration 20` (or --max-requests) stops a fixed-length point before its planned prompts: such points
    were `valid` on 32 of 40 prompts, and across the AMD master on 3 requests each. A fixed-length point is a result
    once it finished its planned prompts (InferenceX's num-prompts), as it is unbounded."""
    (job, *_) = sorted(jobs_from_files([RUN / "fixed-sim.yaml"]), key=lambda j: j.concs[0])
    point = Point.of(job)
    config = engine_config_from_argv(engines.render(job, simulate=True).argv)
    planned = point.load.num_requests
    assert planned is not None and planned > 2
    whole = predict_point(point, config).summary
    assert whole is not None
    assert whole.validity.verdict == "valid", whole.validity.reasons
    for cut in (predict_point(point, config, max_requests=2), predict_point(point, config, duration=1e-3)):
        summary = cut.summary
        assert summary is not None
        assert summary.validity.verdict == "smoke", summary.validity.reasons
        finished = summary.requests.successful + summary.requests.failed
        assert f"{finished} of the {planned} planned prompts finished" in " ".join(summary.validity.reasons)
