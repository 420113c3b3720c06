"""`bench` looks before it sends load: nothing listening is exit 2 within seconds (no all-zero table, no spurious
SATURATED warning); the GPU count per-GPU figures divide by comes from the server where it says (the simulator's
TP, SGLang's server info), and where nobody knows it the figure is labelled per endpoint."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support.cli import sim_serve
from support.loopback import serving
from support.stream_server import ServerConfig, StreamServer, free_port

from llmsweep.client.probe import gpus_from_server_info, probe_endpoint, require_endpoint
from llmsweep.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FIXED = ("--isl", "64", "--osl", "8", "--concurrency", "2", "--num-prompts", "4")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_bench_against_a_closed_port_exits_2_within_seconds_and_sends_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    started = time.monotonic()
    res = _cli("bench", "fixed", "--url", f"http://127.0.0.1:{free_port()}", "--model", "m", *FIXED,
               "--out", str(out))
    took = time.monotonic() - started
    assert res.returncode == 2, res.stdout + res.stderr
    assert took < 20  # the interpreter's start on 2 busy cores included; the probe itself is one refused connect
    assert "nothing answers at" in res.stderr and "connection refused" in res.stderr
    assert "--url" in res.stderr  # the fix names what to check
    assert not out.exists()  # no records, no summary, no all-zero table
    assert "SATURATED" not in res.stdout + res.stderr


class _Fake(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, Any]]] = {}

    def _answer(self, status: int, doc: Any) -> None:
        if isinstance(doc, bytes):  # raw bytes, status line and all: an answer that is not (quite) HTTP
            self.wfile.write(doc)
            return
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(*self.routes.get(self.path, (404, {"detail": "Not Found"})))

    def do_POST(self) -> None:  # a 1-token request naming a model: "POST <path> <model>" or "POST <path>", else 404
        model = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}").get("model")
        status, doc = self.routes.get(f"POST {self.path} {model}", self.routes.get(
            f"POST {self.path}", (404, {"error": {"message": f"The model `{model}` does not exist."}})))
        self._answer(status, doc)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def fake() -> Iterator[tuple[str, dict[str, tuple[int, Any]]]]:
    routes: dict[str, tuple[int, Any]] = {}
    with serving(type("Handler", (_Fake,), {"routes": routes})) as url:
        yield url, routes


def test_a_server_still_loading_is_refused_and_one_without_health_routes_passes(fake: Any) -> None:
    url, routes = fake
    routes.update({"/health": (503, {}), "/v1/models": (503, {})})
    with pytest.raises(ConfigError, match=r"not ready .*/health HTTP 503"):
        require_endpoint(url, timeout_s=2)
    routes.clear()
    routes["/v1/models"] = (401, {"error": "no key"})  # no /health, models behind a key: it listens, load goes
    probe = require_endpoint(url + "/v1", timeout_s=2)
    assert probe.answered and not probe.ready and probe.gpus is None


def test_a_service_without_either_route_is_not_sent_load(fake: Any, tmp_path: Path) -> None:
    """Something answers on the port but has neither /health nor /v1/models (404 on both: a proxy path, another
    service): `bench` exits 2 before sending load. It used to send it and print a table of zeros."""
    url, _ = fake
    with pytest.raises(ConfigError, match=r"not as an OpenAI-compatible server .*/v1/models HTTP 404"):
        require_endpoint(url, timeout_s=2)
    out = tmp_path / "bench"
    res = _cli("bench", "fixed", "--url", url, "--model", "m", *FIXED, "--out", str(out))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "no load was sent" in res.stderr and not out.exists()


def test_sglang_server_info_gives_the_gpu_count(fake: Any) -> None:
    url, routes = fake
    routes.update({"/health": (200, {}), "/get_server_info": (200, {"tp_size": 4, "dp_size": 2, "pp_size": 1})})
    probe = probe_endpoint(url, timeout_s=2)
    assert probe.ready and probe.gpus == 8 and "get_server_info" in (probe.gpus_from or "")
    # Data-parallel attention splits the TP group's GPUs; it adds none.
    assert gpus_from_server_info({"tp_size": 8, "dp_size": 8, "enable_dp_attention": True}) == 8
    assert gpus_from_server_info({"tp_size": 2, "pp_size": 2}) == 4
    assert gpus_from_server_info({"version": "0.26.0"}) is None


@pytest.fixture(scope="module")
def sim_tp8() -> Iterator[str]:
    with sim_serve("--model", "llama-3.1-8b", "--tp", "8", "--timing", "constant", "--ttft-ms", "5",
                   "--itl-ms", "1") as url:
        yield url


@pytest.fixture(scope="module")
def sim_tp8_bench(sim_tp8: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                                                   Path]:
    """`bench fixed --json` against the TP-8 simulator, once: the GPU-count test and the source test read it."""
    out = tmp_path_factory.mktemp("sim-tp8") / "bench"
    res = _cli("bench", "fixed", "--url", sim_tp8, "--model", "llama-3.1-8b", *FIXED, "--out", str(out), "--json")
    return res, out


def test_bench_reads_the_simulators_tp_as_its_gpu_count(
        sim_tp8: str, sim_tp8_bench: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    res, _ = sim_tp8_bench
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    tput = summary["throughput"]
    assert summary["provenance"]["gpus_known"] is True and "tp 8" in summary["provenance"]["gpus_from"]
    assert tput["per_gpu"]["total_tps"] == pytest.approx(tput["total_tps"] / 8)
    assert "GPUs serving the endpoint: 8" in res.stderr
    # The table's line says per GPU what `run`'s table says per GPU, and names the endpoint's figure as such.
    plain = _cli("bench", "fixed", "--url", sim_tp8, "--model", "llama-3.1-8b", *FIXED, "--out", str(tmp_path / "p"))
    line = next(x for x in plain.stdout.splitlines() if x.startswith("throughput:"))
    per_gpu = json.loads((tmp_path / "p" / "summary.json").read_text())["throughput"]["per_gpu"]
    assert f"{per_gpu['output_tps']:,.2f} output, {per_gpu['total_tps']:,.2f} total tok/s/GPU (8 GPUs; " in line, line
    # --gpus still wins over what the server says (replicas behind one URL report one's TP), but a count the server
    # contradicts is said, on stderr and in the provenance: a typo'd --gpus had divided by it without a word
    res = _cli("bench", "fixed", "--url", sim_tp8, "--model", "llama-3.1-8b", *FIXED, "--gpus", "2",
               "--out", str(tmp_path / "two"), "--json")
    summary = json.loads(res.stdout)
    assert summary["provenance"]["gpus_from"].startswith("--gpus; the server reports 8 (")
    assert summary["throughput"]["per_gpu"]["total_tps"] == pytest.approx(summary["throughput"]["total_tps"] / 2)
    assert "warning: --gpus 2, but the server reports 8 (" in res.stderr, res.stderr
    agree = _cli("bench", "fixed", "--url", sim_tp8, "--model", "llama-3.1-8b", *FIXED, "--gpus", "8",
                 "--out", str(tmp_path / "eight"), "--json")
    assert json.loads(agree.stdout)["provenance"]["gpus_from"] == "--gpus" and "warning: --gpus" not in agree.stderr


def test_an_unknown_gpu_count_is_labelled_per_endpoint(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:
        res = _cli("bench", "fixed", "--url", server.url, "--model", "m", *FIXED, "--out", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr
    assert "tok/s/endpoint" in res.stdout and "tok/s/GPU" not in res.stdout
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["provenance"]["gpus_known"] is False


def test_a_bench_whose_every_request_failed_prints_no_zeros(tmp_path: Path) -> None:
    """Latencies and throughput with no successful request are not 0: the table shows `-`, and says why."""
    with StreamServer(ServerConfig(fault="http500", fault_every=1)) as srv:
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *FIXED, "--gpus", "1",
                   "--out", str(tmp_path / "bench"))
    text = res.stdout
    assert "0 ok, 4 failed" in text, text
    ttft = next(line for line in text.splitlines() if "TTFT" in line)
    assert "0.00" not in ttft and "-" in ttft, ttft
    assert "throughput: - (no request succeeded)" in text


def test_bench_against_the_simulator_records_simulated_in_wall_clock(
        sim_tp8_bench: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    """The simulator names itself on /version: a bench against it says `source: simulated` and `clock: wall`, as
    `run --live` does, and `summarize` keeps it; a server that does not (a real engine) stays `measured`."""
    res, ran = sim_tp8_bench
    out = tmp_path / "sim"
    shutil.copytree(ran, out)  # summarize rewrites it: on a copy of the shared run
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["source"] == "simulated"
    assert summary["provenance"]["source"] == "simulated" and summary["provenance"]["clock"] == "wall"
    # ... and, since the simulator counts prompt tokens as the built-in word tokenizer does, its lengths are exact
    said = [line for line in res.stderr.splitlines() if line.startswith("tokenizer:")]
    assert said == ["tokenizer: built-in words (the simulator counts prompt tokens the same way)"], res.stderr
    assert json.loads((out / "summary.json").read_text())["source"] == "simulated"
    again = _cli("summarize", str(out), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["source"] == "simulated"
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:
        res = _cli("bench", "fixed", "--url", server.url, "--model", "m", *FIXED, "--out", str(tmp_path / "real"),
                   "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["source"] == "measured" and summary["provenance"]["source"] == "measured"
    assert summary["provenance"]["clock"] == "wall"


def test_a_model_the_server_does_not_list_is_refused_before_any_load(sim_tp8: str, tmp_path: Path) -> None:
    """`--model` not among the ids /v1/models lists: exit 2 naming the served ids and the fix, nothing sent (every
    request would have been a 404, reported only as `errors: {'http': N}`)."""
    out = tmp_path / "bench"
    res = _cli("bench", "fixed", "--url", sim_tp8, "--model", "Qwen/Wrong", *FIXED, "--out", str(out))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "does not serve model 'Qwen/Wrong'" in res.stderr and "lists 'llama-3.1-8b'" in res.stderr
    assert "fix: --model llama-3.1-8b" in res.stderr and "no load was sent" in res.stderr
    assert not out.exists()


def test_the_model_check_reads_v1_models_and_passes_when_it_gives_no_list(fake: Any) -> None:
    url, routes = fake
    routes.update({"/health": (200, {}), "/v1/models": (200, {"object": "list", "data": [{"id": "a"}, {"id": "b"}]})})
    assert probe_endpoint(url, timeout_s=2).models == ("a", "b")  # asked even though /health answered first
    require_endpoint(url, model="b", timeout_s=2)
    with pytest.raises(ConfigError, match=r"does not serve model 'c': its /v1/models lists 'a', 'b', and a 1-token "
                                          r"request naming it was answered HTTP 404 .*does not exist") as err:
        require_endpoint(url, model="c", timeout_s=2)
    assert err.value.fix is not None and err.value.fix.startswith("--model a")
    # a server that lists one id but takes others (SGLang, llama.cpp, Ollama's tags) is sent load, with a note
    routes["POST /v1/completions c"] = (200, {"choices": [{"text": "x"}]})
    with pytest.raises(ConfigError):  # the route the load uses is the one asked
        require_endpoint(url, model="c", timeout_s=2, api="chat")
    taken = require_endpoint(url, model="c", timeout_s=2, api="completions")
    assert taken.notes == ("--model 'c' is not among the ids /v1/models lists ('a', 'b'); a 1-token request naming "
                           "it was answered HTTP 200: sending load under that name",)
    routes["/v1/models"] = (401, {"error": "no key"})  # no list to check against: the requests will say
    assert require_endpoint(url, model="c", timeout_s=2).models is None


def test_an_answer_that_is_not_http_is_said_not_raised(fake: Any) -> None:
    """Bytes that are no HTTP response (a status line of garbage, a body that breaks off) are what the server
    answered, not a traceback: on the readiness routes exit 2 naming them; on the 1-token model check a note, load
    goes on, as for any answer but a 404; a 404 whose body breaks off is still a 404."""
    url, routes = fake
    garbage = (0, b"garbage\r\n\r\n")
    routes.update({"/health": garbage, "/v1/models": garbage})
    with pytest.raises(ConfigError, match=r"answers, but not in HTTP \(/health an answer that is not HTTP "
                                          r"\(BadStatusLine: garbage\)") as err:
        require_endpoint(url, timeout_s=2)
    assert err.value.fix is not None and "scheme" in err.value.fix
    broken_404 = (0, b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")  # a chunk size of zz
    routes.update({"/health": (200, {}), "/v1/models": (200, {"object": "list", "data": [{"id": "a"}]}),
                   "POST /v1/chat/completions c": garbage, "POST /v1/completions c": broken_404})
    taken = require_endpoint(url + "/v1/", model="c", timeout_s=2)  # the load's route from a base URL with /v1/
    assert taken.notes == ("--model 'c' is not among the ids /v1/models lists ('a'); a 1-token request naming it "
                           "got an answer that is not HTTP (BadStatusLine: garbage): sending load under that name",)
    with pytest.raises(ConfigError, match=r"does not serve model 'c': .* was answered HTTP 404; no load was sent"):
        require_endpoint(url, model="c", timeout_s=2, api="completions")


def test_bench_says_its_tokenizer_and_its_help_says_the_default(tmp_path: Path) -> None:
    """bench counts prompt lengths with the built-in word tokenizer unless --tokenizer is given (not the model's, as
    the recipe field's default is): the help says so, and a run against an endpoint says so on stderr."""
    help_text = " ".join(_cli("bench", "fixed", "--help").stdout.split())
    assert "--tokenizer" in help_text and "default: the built-in word tokenizer" in help_text
    assert "(default: model)" not in help_text
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:
        res = _cli("bench", "fixed", "--url", server.url, "--model", "m", *FIXED, "--out", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr
    said = [line for line in res.stderr.splitlines() if line.startswith("tokenizer:")]
    assert said == ["tokenizer: built-in words (prompt lengths are words, not the model's tokens; pass --tokenizer "
                    "for the model's)"], res.stderr


def test_a_run_with_errors_prints_each_error_class_first_message(tmp_path: Path) -> None:
    """Not only `errors: {'http': 4}`: the server's answer to the first failed request of each class."""
    with StreamServer(ServerConfig(fault="http500", fault_every=1)) as srv:
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *FIXED, "--gpus", "1",
                   "--out", str(tmp_path / "bench"))
    assert res.returncode == 1
    first = [line for line in res.stderr.splitlines() if line.startswith("first ")]
    assert len(first) == 1 and first[0].startswith("first http error: HTTP 500") and "injected failure" in first[0]
    run = json.loads((tmp_path / "bench" / "run.json").read_text())
    assert "injected failure" in run["client"]["first_errors"]["http"]


def test_the_progress_shows_the_drain_after_the_window(tmp_path: Path) -> None:
    """After the profiling window the client waits up to the grace for the requests in flight: the progress says so
    on a line of its own (how many were in flight, how long it waited), not a bar stopped at the window's length."""
    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.02)) as srv:  # 50 tokens: 1 s per request
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "16", "--osl", "50",
                   "--concurrency", "2", "--duration", "0.5", "--num-warmups", "0", "--grace", "20",
                   "--out", str(tmp_path / "bench"))
    assert res.returncode in (0, 1), res.stderr  # a half-second window is no submission; the run itself completes
    # stderr is a pipe here: timestamped lines, the drain's when it starts and where it ended
    drain = [line.split("] ", 1)[1] for line in res.stderr.splitlines() if "] draining: " in line]
    assert len(drain) == 2, res.stderr
    assert drain[0].startswith("draining: 2 in flight (of 2 when sending stopped; grace 20 s)"), drain
    assert drain[1].startswith("draining: none in flight (of 2 when sending stopped; grace 20 s)"), drain


def test_a_bench_into_a_log_says_what_it_is_doing_while_it_runs(tmp_path: Path) -> None:
    """stderr not a terminal (a log, CI, a pipe): a timestamped line at each phase of the run — warming up, measuring
    (with the window), draining — and its last counters; the rich bar drew one frame there, at the end, so a bench
    said nothing for its whole window."""
    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.02)) as srv:  # 30 tokens: 0.6 s per request
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "16", "--osl", "30",
                   "--concurrency", "2", "--duration", "1", "--num-warmups", "2", "--gpus", "1",
                   "--out", str(tmp_path / "bench"))
    assert res.returncode in (0, 1), res.stderr
    said = [line for line in res.stderr.splitlines() if re.match(r"^\[\d\d:\d\d:\d\d\] (bench|draining): ", line)]
    assert any("bench: warming up: done 0 in-flight 2" in line for line in said), res.stderr  # said as it starts
    assert any(", window 0/1 s" in line for line in said), res.stderr  # measuring, said as the window opens
    assert "━" not in res.stderr, res.stderr  # no bar drawn into the log


@pytest.mark.parametrize(("args", "said"), [
    (("--gpus", "0"), "'--gpus': 0 is not in the range x>=1"),  # ran the whole load, then failed in the summary
    (("--concurrency", "0"), "'--concurrency': 0 is not in the range x>=1"),
    (("--request-rate", "inf"), "'--request-rate': 'inf' is not a finite number"),  # OverflowError mid-start
    (("--request-rate", "0"), "'--request-rate': 0.0 is not in the range x>0"),
    (("--duration", "-5"), "'--duration': -5.0 is not in the range x>0"),
    (("--isl", "0"), "'--isl': 0 is not in the range x>=1"),
    (("--osl", "-1"), "'--osl': -1 is not in the range x>=1"),
    (("--range-ratio", "2"), "'--range-ratio': 2.0 is not in the range 0<x<=1"),
    (("--num-warmups", "-1"), "'--num-warmups': -1 is not in the range x>=0"),
    (("--max-failure-ratio", "2"), "'--max-failure-ratio': 2.0 is not in the range 0<=x<=1"),
    (("--request-timeout", "0"), "'--request-timeout': 0.0 is not in the range x>0"),
])
def test_an_option_out_of_range_is_refused_before_any_load(args: tuple[str, ...], said: str, tmp_path: Path) -> None:
    """Every option out of its range is exit 2 naming the option, as click says it, before a request is sent: not
    a pydantic traceback (exit 1), nor a whole load sent before the summary refuses `--gpus 0`."""
    values = {"--isl": "64", "--osl": "8", "--concurrency": "2", "--num-prompts": "4"}
    if args[0] in ("--request-rate", "--duration"):  # one of --concurrency/--request-rate, --num-prompts/--duration
        values.pop("--concurrency" if args[0] == "--request-rate" else "--num-prompts")
    values.update({args[0]: args[1]})
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:
        res = _cli("bench", "fixed", "--url", server.url, "--model", "m",
                   *(x for kv in values.items() for x in kv), "--out", str(out))
        sent = list(server.served)  # the streamed requests it answered
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"Invalid value for {said}" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "ValidationError" not in res.stderr
    assert not sent and not out.exists()


def test_a_server_behind_an_api_key_is_sent_the_key_from_the_environment(tmp_path: Path) -> None:
    """A server started with an API key (`vllm serve --api-key`) answers 401 to every request without it: bench
    sends $OPENAI_API_KEY as a bearer token, to the load and to the probe's routes, and writes it nowhere."""
    key = "sk-test-0123456789"
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005, api_key=key)) as server:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": key}
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", server.url,
                              "--model", "m", *FIXED, "--out", str(tmp_path / "b"), "--json"],
                             capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        summary = json.loads(res.stdout)
        assert summary["requests"]["successful"] == 4 and summary["requests"]["failed"] == 0
        assert "sending $OPENAI_API_KEY as the API key" in res.stderr and key not in res.stdout + res.stderr
        for name in ("run.json", "summary.json", "records.jsonl"):
            assert key not in (tmp_path / "b" / name).read_text()
        # Without the key the same server's 401s are recorded failures with the server's words, as before.
        env.pop("OPENAI_API_KEY")
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", server.url,
                              "--model", "m", *FIXED, "--out", str(tmp_path / "nokey")],
                             capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "first http error: HTTP 401" in res.stderr, res.stderr


def test_an_https_url_given_to_a_plain_http_server_says_so(tmp_path: Path) -> None:
    """https:// for a server that speaks plain HTTP: the TLS handshake is answered with bytes that are no TLS. Not
    "nothing answers … start the server" (it is running): exit 2 naming the scheme, with the URL to pass, no load."""
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:
        tls = server.url.replace("http://", "https://", 1)
        res = _cli("bench", "fixed", "--url", tls + "/v1", "--model", "m", *FIXED, "--out", str(out))
        sent = list(server.served)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"something at {tls} answers, but not in TLS" in res.stderr, res.stderr
    assert "nothing answers" not in res.stderr and "start the server" not in res.stderr
    assert f"fix: --url {server.url} " in res.stderr, res.stderr
    assert not sent and not out.exists() and "Traceback" not in res.stderr


def test_a_url_without_its_scheme_is_refused_naming_the_one_to_give(tmp_path: Path) -> None:
    """`--url 127.0.0.1:8000`: the request library said `unknown url type`, and the probe that nothing answers there.
    It is refused as the option is parsed (exit 2), with the URL to give; nothing is sent, no folder written."""
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:
        bare = server.url.removeprefix("http://")
        res = _cli("bench", "fixed", "--url", bare, "--model", "m", *FIXED, "--out", str(out))
        sent = list(server.served)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"give --url http://{bare}" in res.stderr and "unknown url type" not in res.stderr, res.stderr
    assert not sent and not out.exists() and "Traceback" not in res.stderr


def test_a_chat_only_server_asked_for_completions_gets_the_hint_to_try_chat(tmp_path: Path) -> None:
    """`bench fixed` sends completions by default; a server without that route answers every request 404, and the run
    ended on `first http error: HTTP 404: Not Found` with nothing pointing at `--api chat`."""
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005, chat_only=True)) as server:
        res = _cli("bench", "fixed", "--url", server.url, "--model", "m", *FIXED, "--out", str(out))
    assert "first http error: HTTP 404" in res.stderr, res.stderr
    assert "hint: the server answers /v1/completions with 404: it may serve the other API only; try --api chat" in \
        res.stderr, res.stderr
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as server:  # both routes served: no hint
        fine = _cli("bench", "fixed", "--url", server.url, "--model", "m", *FIXED, "--out", str(tmp_path / "ok"))
    assert fine.returncode == 0 and "hint:" not in fine.stderr, fine.stderr


def test_a_tls_server_whose_certificate_this_host_does_not_trust_says_so(tmp_path: Path) -> None:
    """A server behind a self-signed (or private-CA) certificate answers, in TLS: the probe said "nothing answers …
    start the server". It names the certificate and the fix (SSL_CERT_FILE), sends no load; trusted through
    SSL_CERT_FILE, the same server passes the probe."""
    import http.server
    import ssl
    import threading

    from llmsweep.client.probe import require_endpoint
    from llmsweep.errors import ConfigError

    cert, key = _self_signed(tmp_path)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"object": "list", "data": [{"id": "m"}]}' if self.path == "/v1/models" else b"ok"
            self.send_response(200 if self.path in ("/health", "/v1/models") else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        res = _cli("bench", "fixed", "--url", url, "--model", "m", *FIXED, "--out", str(tmp_path / "bench"))
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"the server at {url} answers in TLS, but its certificate is not one this host trusts" in res.stderr
        assert "fix: point SSL_CERT_FILE at the CA certificate" in res.stderr and "nothing answers" not in res.stderr
        assert not (tmp_path / "bench").exists()
        with pytest.MonkeyPatch.context() as env:
            env.setenv("SSL_CERT_FILE", str(cert))
            try:
                probe = require_endpoint(url, model="m")
            except ConfigError as exc:  # pragma: no cover - what the assertion shows
                raise AssertionError(f"trusted through SSL_CERT_FILE, the probe still refused: {exc}") from exc
        assert probe.ready and probe.models == ("m",)
    finally:
        server.shutdown()
        server.server_close()


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (the openssl CLI; the test is skipped without it)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI to make a self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@contextlib.contextmanager
def _aiohttp_tls(cert: Path, key: Path) -> Iterator[int]:
    """An https-only aiohttp server (as an engine behind `--ssl-certfile`) on a free port, in a thread of its own."""
    import asyncio
    import ssl
    import threading

    from aiohttp import web

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m"}]})

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_get("/health", models)
    app.router.add_get("/v1/models", models)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_an_https_only_server_asked_over_http_is_told_to_take_https(tmp_path: Path) -> None:
    """The TLS layer takes the connection and drops a request that is no handshake, with no reply: the probe said
    "nothing answers … fix: start the server". Something listens; it speaks TLS, and the fix is the https URL (with
    the certificate's trust where this host lacks it)."""
    cert, key = _self_signed(tmp_path)
    with _aiohttp_tls(cert, key) as port:
        res = _cli("bench", "fixed", "--url", f"http://127.0.0.1:{port}", "--model", "m", *FIXED,
                   "--out", str(tmp_path / "bench"))
        with pytest.MonkeyPatch.context() as env:
            env.setenv("SSL_CERT_FILE", str(cert))
            with pytest.raises(ConfigError) as trusted:
                require_endpoint(f"http://127.0.0.1:{port}", model="m")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "nothing answers" not in res.stderr and "start the server" not in res.stderr
    assert f"something at http://127.0.0.1:{port} accepts connections but sends no HTTP back" in res.stderr
    assert f"it speaks TLS (https://127.0.0.1:{port}/health answers a TLS certificate this host does not trust" \
        in res.stderr
    assert f"fix: --url https://127.0.0.1:{port} (the scheme the server speaks); its certificate is not one this " \
        "host trusts: point SSL_CERT_FILE" in res.stderr
    assert not (tmp_path / "bench").exists()
    assert f"https://127.0.0.1:{port}/health answers HTTP 200" in str(trusted.value)
    assert trusted.value.fix == f"--url https://127.0.0.1:{port} (the scheme the server speaks)"


def test_a_server_that_closes_connections_unanswered_is_no_nothing_answers() -> None:
    """Another protocol on the port that hangs up on an HTTP request (no TLS there either): something listens, so the
    fix is to check the scheme and port, not to start a server."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        with pytest.raises(ConfigError) as err:
            require_endpoint(f"http://127.0.0.1:{port}", timeout_s=2.0)
    finally:
        listener.close()
    assert f"something at http://127.0.0.1:{port} accepts connections but sends no HTTP back" in str(err.value)
    assert "speaks TLS" not in str(err.value)
    assert err.value.fix == "check --url: the scheme (http or https) and the port of the serving engine"
