"""Before any load: is something serving at the URL, what is it, which models does it serve, and how many GPUs?

`probe_endpoint` asks the server's cheap routes (`/health`, `/v1/models`) whether it answers and which model ids it
serves, and what it says about itself (`/version`: the simulator names itself `engine: sim` and reports its TP;
SGLang's `/get_server_info` its tp/dp/pp sizes). It never sends a generation request. `require_endpoint` turns
"nothing answers" (and a `--model` the server does not list) into a ConfigError (exit 2) within seconds, where
sending load would take the whole window and end in an all-zero table (or a bare count of HTTP errors).

vLLM and TensorRT-LLM expose no parallel config on a route a client can read; for them `gpus` stays None and the
caller labels its per-GPU figures per endpoint unless the user says `--gpus`.
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from llmsweep.client.config import api_root, api_url
from llmsweep.errors import ConfigError

if TYPE_CHECKING:
    from llmsweep.metrics.model import RunSource

log = logging.getLogger(__name__)

READY_ROUTES = ("/health", "/v1/models")
NOT_HTTP = "an answer that is not HTTP"
"""What a route answered when the bytes that came back are no HTTP response (a status line of garbage: a TLS port
asked in plain HTTP, another protocol on the port)."""
NO_REPLY = "the connection was accepted, then closed with no reply"
"""What a route answered when the server took the connection and closed it (or reset it) without a byte of answer:
something listens there, but sends no HTTP — an https-only server asked in plain HTTP (its TLS layer drops a request
that is no handshake), another protocol on the port. Not "nothing answers": nothing refused the connection."""
NOT_TRUSTED = "a TLS certificate this host does not trust"
"""What a route answered over https when the server's certificate did not verify (self-signed, a private CA): it
answers, in TLS, and the client would refuse every request the same way."""
NOT_TLS = "an answer that is not TLS"
"""What a route answered over https when the TLS handshake got bytes that are no TLS back (a plain-HTTP server: its
`400 Bad Request` to the handshake reads as OpenSSL's `WRONG_VERSION_NUMBER`)."""


@dataclass(frozen=True)
class EndpointProbe:
    """What the server's cheap routes said: each route's answer, and its GPU count where it reports one."""

    root: str
    answers: dict[str, str] = field(default_factory=dict)
    """Route → `HTTP 200`, `HTTP 503`, or why nothing came back (`connection refused`, `timed out`)."""
    ready: bool = False
    """A readiness route answered 2xx."""
    answered: bool = False
    """Something answered HTTP at all (a 404 on both routes still means a server listens)."""
    gpus: int | None = None
    gpus_from: str | None = None
    """Where `gpus` was read, e.g. `sim /version: tp 8`."""
    engine: str | None = None
    """The engine as the server names itself on `/version` (the simulator says `sim`; vLLM names none)."""
    models: tuple[str, ...] | None = None
    """The model ids `/v1/models` lists; None when it did not answer 2xx with a list."""
    notes: tuple[str, ...] = ()
    """What the caller should say before sending load (a `--model` the list lacks that the server still took)."""

    def describe(self) -> str:
        return ", ".join(f"{route} {answer}" for route, answer in self.answers.items())

    def gpu_count(self, given: int | None) -> tuple[int, dict[str, Any]]:
        """The GPU count per-GPU figures divide by, and the provenance that says where it came from (`gpus_known`,
        `gpus_from`): `given` (`--gpus`) wins; else the server's own report; else 1, recorded as unknown so the
        figures are labelled per endpoint rather than passed off as per GPU. `bench` and `peer crosscheck` alike.
        A `given` count the server's own report contradicts still wins (replicas behind one URL report one's), and
        `gpus_from` says both (`gpus_disagree`: what the caller warns of)."""
        if given is not None:
            if self.gpus is not None and int(self.gpus) != given:
                return given, {"gpus_known": True,
                               "gpus_from": f"--gpus; the server reports {int(self.gpus)} ({self.gpus_from})"}
            return given, {"gpus_known": True, "gpus_from": "--gpus"}
        if self.gpus is not None:
            return int(self.gpus), {"gpus_known": True, "gpus_from": self.gpus_from}
        return 1, {"gpus_known": False,
                   "gpus_from": "unknown: the server reports no GPU count and --gpus was not given"}

    def gpus_disagree(self, given: int | None) -> str | None:
        """A warning when `given` (`--gpus`) is not the GPU count the server reports (a typo'd `--gpus 1` against
        TP 8 divides the whole endpoint's throughput by one); None when they agree or either is unknown."""
        if given is None or self.gpus is None or int(self.gpus) == given:
            return None
        return (f"warning: --gpus {given}, but the server reports {int(self.gpus)} ({self.gpus_from}): per-GPU figures "
                f"divide by {given}, as given (drop --gpus to divide by the server's count)")

    @property
    def simulated(self) -> bool:
        """Whether the server is the simulator, as it says itself (`engines.runs_on_simulator` of its engine)."""
        from llmsweep.engines import runs_on_simulator

        return runs_on_simulator(self.engine, simulate=False)

    @property
    def source(self) -> RunSource:
        """The label results of load sent to this server carry for what served them (`metrics.model.run_source`):
        `bench`, `peer crosscheck` and `al collect` record it in their run.json."""
        from llmsweep.metrics.model import run_source

        return run_source(self.simulated)


def _get(url: str, timeout_s: float, headers: dict[str, str]) -> tuple[int | None, Any, str]:
    """(status, parsed JSON or None, a short description); status None when no HTTP answer came back."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            status = int(resp.status)
            try:
                body = resp.read(1 << 20)
            except http.client.HTTPException:  # a broken body (a bad chunk): the status stands, no document
                body = b""
    except urllib.error.HTTPError as exc:
        return exc.code, None, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            return None, None, "connection refused"
        if isinstance(reason, (http.client.RemoteDisconnected, ConnectionResetError)):  # (the first is the second)
            return None, None, NO_REPLY
        if isinstance(reason, TimeoutError):
            return None, None, "timed out"
        if isinstance(reason, ssl.SSLCertVerificationError):
            return None, None, f"{NOT_TRUSTED} ({reason.verify_message or reason})"
        if isinstance(reason, ssl.SSLError):
            return None, None, f"{NOT_TLS} ({' '.join(str(reason).split())[:100]})"
        return None, None, str(reason)
    except http.client.HTTPException as exc:
        return None, None, _not_http(exc)
    try:
        doc = json.loads(body.decode() or "null")
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested past the decoder's depth
        doc = None
    return status, doc, f"HTTP {status}"


def _not_http(exc: http.client.HTTPException) -> str:
    return f"{NOT_HTTP} ({type(exc).__name__}: {' '.join(str(exc).split())[:100]})"


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def gpus_from_server_info(doc: Any) -> int | None:
    """GPUs of one SGLang server from `/get_server_info`: tp × pp, times dp unless dp is data-parallel attention
    inside the TP group (`enable_dp_attention`), where the dp ranks share the tp GPUs."""
    if not isinstance(doc, dict):
        return None
    tp = _positive(doc.get("tp_size"))
    if tp is None:
        return None
    pp = _positive(doc.get("pp_size")) or 1
    dp = _positive(doc.get("dp_size")) or 1
    return tp * pp * (1 if doc.get("enable_dp_attention") else dp)


def _model_entries(doc: Any) -> list[dict[str, Any]] | None:
    """The entries of an OpenAI `/v1/models` answer (`{"data": [{"id": ...}, ...]}`); None for anything else."""
    data = doc.get("data") if isinstance(doc, dict) else None
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else None


def model_ids(doc: Any) -> tuple[str, ...] | None:
    """The ids an OpenAI `/v1/models` answer lists; None for anything else."""
    ids = tuple(m["id"] for m in _model_entries(doc) or () if isinstance(m.get("id"), str))
    return ids or None


def model_context(doc: Any, model: str | None) -> int | None:
    """The context length (`max_model_len`: vLLM, SGLang and the simulator report it; vLLM's after it fitted an `auto`
    context to its memory) a `/v1/models` answer gives the model `model`, or with no name given its only entry. None
    where it lists no such model (a server of another model says nothing of this one) or gives no length."""
    entries = _model_entries(doc) or []
    named = [m for m in entries if m.get("id") == model] if model else entries
    return _positive(named[0].get("max_model_len")) if len(named) == 1 else None


def probe_endpoint(base_url: str, *, timeout_s: float = 3.0, headers: dict[str, str] | None = None) -> EndpointProbe:
    """Ask the readiness routes, the served models, then the info routes for the engine and its GPU count; each
    request waits at most `timeout_s`."""
    root = api_root(base_url)
    hdrs = dict(headers or {})
    answers: dict[str, str] = {}
    ready = answered = False
    models_doc: Any = None
    for route in READY_ROUTES:
        status, doc, said = _get(root + route, timeout_s, hdrs)
        answers[route] = said
        answered = answered or status is not None
        if status is not None and 200 <= status < 300:
            ready = True
            models_doc = doc if route == "/v1/models" else None
            break
        if status is None and "refused" in said.lower():
            break  # nothing listens: the next route would say the same
    if ready and "/v1/models" not in answers:  # ready on /health: which models it serves is one more cheap GET
        status, models_doc, _ = _get(root + "/v1/models", timeout_s, hdrs)
        if status is None or not 200 <= status < 300:
            models_doc = None
    gpus, gpus_from, engine = None, None, None
    if answered:
        status, doc, _ = _get(root + "/version", timeout_s, hdrs)
        if isinstance(doc, dict) and isinstance(doc.get("engine"), str):
            engine = doc["engine"]
        if isinstance(doc, dict) and (tp := _positive(doc.get("tp"))) is not None:
            gpus, gpus_from = tp, f"{doc.get('engine') or 'server'} /version: tp {tp}"
        else:
            status, doc, _ = _get(root + "/get_server_info", timeout_s, hdrs)
            if (n := gpus_from_server_info(doc)) is not None:
                gpus, gpus_from = n, (f"sglang /get_server_info: tp {doc['tp_size']}, dp {doc.get('dp_size', 1)}, "
                                      f"pp {doc.get('pp_size', 1)}")
    return EndpointProbe(root=root, answers=answers, ready=ready, answered=answered, gpus=gpus, gpus_from=gpus_from,
                         engine=engine, models=model_ids(models_doc))


def _try_model(base_url: str, model: str, api: str, timeout_s: float,
               headers: dict[str, str]) -> tuple[int | None, str]:
    """One 1-token request naming `model` on the route the load will use (`api_url`, as `Endpoint.url_for`): its
    status and the start of its answer, or None and what came back instead (no answer, or one that is not HTTP)."""
    body: dict[str, Any] = ({"messages": [{"role": "user", "content": "hi"}]} if api == "chat"
                            else {"prompt": "hi"})
    data = json.dumps({"model": model, **body, "max_tokens": 1, "stream": False}).encode()
    request = urllib.request.Request(api_url(base_url, api), data=data, method="POST",
                                     headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=max(timeout_s, 10.0)) as resp:
            return int(resp.status), ""
    except urllib.error.HTTPError as exc:
        try:
            said = exc.read(600).decode(errors="replace")
        except (http.client.HTTPException, OSError):  # the status stands; its body broke off
            said = ""
        return exc.code, " ".join(said.split())
    except (urllib.error.URLError, OSError) as exc:
        return None, f"no answer ({getattr(exc, 'reason', exc)})"
    except http.client.HTTPException as exc:
        return None, _not_http(exc)


def _no_reply(probe: EndpointProbe, timeout_s: float, headers: dict[str, str]) -> ConfigError:
    """The error for a server that takes connections and closes them unanswered: asked over http, it is most often an
    https-only server, so one GET of `/health` over https says whether TLS answers there; when it does, the fix is
    the https URL."""
    scheme, rest = probe.root.split("://", 1)
    said = f"something at {probe.root} accepts connections but sends no HTTP back ({probe.describe()})"
    if scheme == "http":
        https = "https://" + rest
        status, _, answer = _get(https + READY_ROUTES[0], timeout_s, headers)
        if status is not None or answer.startswith(NOT_TRUSTED):
            trust = ("; its certificate is not one this host trusts: point SSL_CERT_FILE at the CA certificate that "
                     "signed it" if answer.startswith(NOT_TRUSTED) else "")
            return ConfigError(f"{said}: it speaks TLS ({https}{READY_ROUTES[0]} answers {answer}); no load was sent",
                               fix=f"--url {https} (the scheme the server speaks){trust}")
    return ConfigError(f"{said}; no load was sent",
                       fix="check --url: the scheme (http or https) and the port of the serving engine")


def require_endpoint(base_url: str, *, model: str | None = None, timeout_s: float = 3.0,
                     headers: dict[str, str] | None = None, api: str = "chat") -> EndpointProbe:
    """The probe, or a ConfigError when nothing answers at `base_url`, the server says it is not ready (5xx), it
    has neither readiness route (404 on `/health` and on `/v1/models`: whatever answers there is no OpenAI-compatible
    server, and load sent to it would only print a table of zeros), or its `/v1/models` lists models and `model` is
    not one of them and one 1-token request naming it on the `api` route is answered 404 (every request would be). A
    server that lists one id and takes others (SGLang, llama.cpp, Ollama's tags, gateways) passes, with a note.

    A server that answers its routes with another 4xx (`/v1/models` behind a key: 401, 403) passes: it listens, and
    the requests themselves will say what is wrong; so does one whose `/v1/models` gives no list.
    """
    probe = probe_endpoint(base_url, timeout_s=timeout_s, headers=headers)
    if not probe.answered and any(a.startswith(NOT_HTTP) for a in probe.answers.values()):
        raise ConfigError(f"something at {probe.root} answers, but not in HTTP ({probe.describe()}); no load was sent",
                          fix="check --url: the scheme (http or https) and the port of the serving engine")
    if not probe.answered and any(a.startswith(NO_REPLY) for a in probe.answers.values()):
        raise _no_reply(probe, timeout_s, headers or {})
    if not probe.answered and any(a.startswith(NOT_TLS) for a in probe.answers.values()):
        plain = "http://" + probe.root.split("://", 1)[1]
        raise ConfigError(f"something at {probe.root} answers, but not in TLS ({probe.describe()}): a plain-HTTP "
                          "server asked over https; no load was sent",
                          fix=f"--url {plain} (the scheme the server speaks)")
    if not probe.answered and any(a.startswith(NOT_TRUSTED) for a in probe.answers.values()):
        raise ConfigError(f"the server at {probe.root} answers in TLS, but its certificate is not one this host "
                          f"trusts ({probe.describe()}); no load was sent",
                          fix="point SSL_CERT_FILE at the CA certificate (bundle) that signed the server's, so this "
                              "host trusts it; or give the server's plain http:// port")
    if not probe.answered:
        raise ConfigError(f"nothing answers at {probe.root} ({probe.describe()}); no load was sent",
                          fix="start the server, or check --url (host, port, scheme)")
    if not probe.ready and all(a.startswith("HTTP 5") for a in probe.answers.values()):
        raise ConfigError(f"the server at {probe.root} is not ready ({probe.describe()}); no load was sent",
                          fix="wait until its /health answers 200 (a large model takes minutes to load), then rerun")
    if not probe.ready and probe.answers and all(a == "HTTP 404" for a in probe.answers.values()):
        raise ConfigError(f"{probe.root} answers, but not as an OpenAI-compatible server ({probe.describe()}); no "
                          "load was sent",
                          fix="point --url at the serving engine's root (the one whose /v1/models lists the model), "
                              "not a proxy path or another service on that port")
    if not probe.ready:
        log.info("no readiness route answered 2xx at %s (%s); sending load anyway", probe.root, probe.describe())
    if model is not None and probe.models is not None and model not in probe.models:
        served = ", ".join(repr(m) for m in probe.models)
        status, answer = _try_model(base_url, model, api, timeout_s, headers or {})
        if status == 404:
            raise ConfigError(f"the server at {probe.root} does not serve model {model!r}: its /v1/models lists "
                              f"{served}, and a 1-token request naming it was answered HTTP 404"
                              + (f" ({answer[:300]})" if answer else "") + "; no load was sent",
                              fix=f"--model {probe.models[0]}" + (" (or another id it lists)" if len(probe.models) > 1
                                                                   else ""))
        answered = f"was answered HTTP {status}" if status is not None else f"got {answer}"
        probe = replace(probe, notes=(*probe.notes, f"--model {model!r} is not among the ids /v1/models lists "
                                      f"({served}); a 1-token request naming it {answered}: sending load under that "
                                      "name"))
    return probe
