"""The parts of an environment that answer over HTTP, each asked to answer as itself (`chaos env check --probe`),
and the one result type every probe returns."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from chaos.env import Environment, FaultProxyConfig, Target
from chaos.errors import ChaosError

BODY_LIMIT = 4 << 20  # a dcgm-exporter of 8 GPUs serves a few hundred KiB


@dataclass(frozen=True)
class Probe:
    """One part's result: what it is, where, whether it is what the file says, and why not."""

    what: str
    address: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Answer:
    """An HTTP answer (status None: no answer, `error` says why)."""

    status: int | None
    body: bytes = b""
    error: str = ""

    def got(self) -> str:
        """What came back, for a failure line."""
        if self.status is None:
            return f"no answer ({self.error})"
        snippet = " ".join(self.body[:60].decode("utf-8", "replace").split())
        return f"HTTP {self.status}" + (f" {snippet!r}" if snippet else "")

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def get(url: str, timeout: float, headers: dict[str, str] | None = None) -> Answer:
    """GET `url` once; any failure is an Answer, never an exception."""
    req = urllib.request.Request(url, method="GET", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Answer(r.status, r.read(BODY_LIMIT))
    except urllib.error.HTTPError as e:
        return Answer(e.code, e.read(4096))
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return Answer(None, error=f"{type(reason).__name__}: {reason}".replace("\n", " "))


def model_ids(answer: Answer) -> list[str] | None:
    """The ids of an OpenAI model list (`{"data": [{"id": ...}]}`), None when it is not one."""
    doc = answer.json() if answer.status == 200 else None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        return None
    return [m["id"] for m in data]


def check_api(env: Environment, timeout: float) -> Probe:
    """The API lists the configured model on /v1/models (with the api_key when the file sets one)."""
    model, url = env.endpoints.model, env.endpoints.api.rstrip("/")
    auth = {"Authorization": f"Bearer {env.endpoints.api_key}"} if env.endpoints.api_key else {}
    answer = get(url + "/v1/models", timeout, auth)
    ids = model_ids(answer)
    expected = f"expected /v1/models listing model {model!r}"
    if ids is None:
        why = " (the api_key was refused)" if answer.status in (401, 403) and auth else ""
        return Probe("api endpoint", url, False, f"{expected}; got {answer.got()}{why}")
    if model not in ids:
        return Probe("api endpoint", url, False, f"{expected}; it lists {', '.join(map(repr, ids)) or 'no model'}")
    return Probe("api endpoint", url, True, f"lists {model!r}")


def check_gateway_admin(env: Environment, url: str, timeout: float, *, page: str | None = None,
                        what: str = "gateway admin") -> Probe:
    """The reference gateway's /metrics (or the metrics `page` at a full URL), with the breaker's
    state series when the file names one."""
    answer = get(page or url.rstrip("/") + "/metrics", timeout)
    series = env.breaker.state_metric
    expected = f"expected Prometheus metrics on {'that page' if page else '/metrics'}{f' with {series}' if series else ''}"
    if answer.status != 200 or (series and series.encode() not in answer.body):
        got = answer.got() if answer.status != 200 else f"HTTP 200 without {series}"
        return Probe(what, url, False, f"{expected}; got {got}")
    return Probe(what, url, True, f"serves {series}" if series else "HTTP 200")


def check_toxiproxy(env: Environment, timeout: float) -> list[Probe]:
    """Toxiproxy's API answers /proxies with its proxy map, and every configured proxy is in it."""
    assert env.toxiproxy is not None
    api = env.toxiproxy.api
    answer = get(api.rstrip("/") + "/proxies", timeout)
    have = answer.json() if answer.status == 200 else None
    if not isinstance(have, dict) or not all(isinstance(v, dict) and "upstream" in v for v in have.values()):
        return [Probe("toxiproxy", api, False, f"expected Toxiproxy's GET /proxies (a JSON map of proxies); "
                                               f"got {answer.got()}")]
    out = [Probe("toxiproxy", api, True, f"{len(have)} proxies")]
    for p in env.toxiproxy.proxies:
        found = have.get(p.name)
        out.append(Probe(f"toxiproxy proxy {p.name}", p.listen, found is not None,
                         f"upstream {found['upstream']}" if found is not None
                         else f"expected proxy {p.name!r} on {api}; it lists {', '.join(sorted(have)) or 'none'}"))
    return out


def check_fault_proxy(env: Environment, fp: FaultProxyConfig, timeout: float) -> Probe:
    """The fault proxy answers GET /_chaos/health as itself and takes the configured token on /_chaos/rules."""
    from chaos.faults.proxy_admin import token_ref

    what, url = f"fault proxy {fp.name}", fp.admin_url
    health = get(url + "/_chaos/health", timeout)
    doc = health.json() if health.status == 200 else None
    if not isinstance(doc, dict) or "upstream" not in doc or "rules" not in doc:
        return Probe(what, url, False, f"expected the fault proxy's GET /_chaos/health (200, JSON with its upstream "
                                       f"and rules); got {health.got()}")
    ref = token_ref(env, fp)  # only now: an embedded stack's token file is made on first use
    try:
        token = ref.value()
    except ChaosError as e:
        return Probe(what, url, False, f"expected a token to try on /_chaos/rules; {e}")
    source = ref.file or (f"${ref.env}" if ref.env else "the file")
    rules = get(url + "/_chaos/rules", timeout, {"Authorization": f"Bearer {token}"})
    if rules.status != 200:
        why = " (the token was refused)" if rules.status == 401 else ""
        return Probe(what, url, False, f"expected GET /_chaos/rules to accept the token from {source}; "
                                       f"got {rules.got()}{why}")
    return Probe(what, url, True, f"upstream {doc['upstream']}, token from {source} accepted")


def check_replica(t: Target, timeout: float) -> Probe:
    """A replica answers /health 200 and lists a model on /v1/models."""
    url = f"http://{t.host}:{t.port}"
    health = get(url + "/health", timeout)
    if health.status != 200:
        return Probe(f"replica {t.name}", url, False, f"expected /health 200; got {health.got()}")
    models = get(url + "/v1/models", timeout)
    ids = model_ids(models)
    if not ids:
        got = models.got() if ids is None else "an empty model list"
        return Probe(f"replica {t.name}", url, False, f"expected /v1/models listing a model; got {got}")
    return Probe(f"replica {t.name}", url, True, f"serves {', '.join(map(repr, ids))}")


def check_dcgm(url: str, timeout: float) -> Probe:
    """A dcgm-exporter serves DCGM_FI_* series on /metrics."""
    answer = get(url.rstrip("/") + "/metrics", timeout)
    if answer.status != 200 or b"DCGM_FI_" not in answer.body:
        got = answer.got() if answer.status != 200 else "HTTP 200 without any DCGM_FI_ series"
        return Probe("dcgm exporter", url, False, f"expected DCGM metrics (DCGM_FI_* series) on /metrics; got {got}")
    return Probe("dcgm exporter", url, True, "serves DCGM_FI_* series")
