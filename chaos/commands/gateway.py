"""`chaos gateway`: run the reference gateway; `chaos gateway reset|state`: talk to its admin API."""
from __future__ import annotations

import http.client
import json
import logging
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

import typer

from chaos.commands import OPTIONAL_ENV_OPTION
from chaos.env import Environment, load
from chaos.errors import ConfigError, StackError

if TYPE_CHECKING:
    from chaos.stack.gateway import GatewaySettings, Replica

gw_app = typer.Typer(help="The reference gateway (two-tier breaker, no-store, HMAC, NFKC).")


def replicas_from_env(env: Environment) -> list[Replica]:
    """One Replica per target, reached through its serve_proxy (Toxiproxy) when it has one."""
    from chaos.stack.gateway import Replica

    proxies = {p.name: p.listen for p in (env.toxiproxy.proxies if env.toxiproxy else [])}
    return [Replica(t.name, f"http://{proxies[t.serve_proxy]}" if t.serve_proxy else f"http://{t.host}:{t.port}", t.pool)
            for t in env.targets]


def settings_from(env: Environment | None, *, listen: str | None = None, stable: list[str] | None = None,
                  canary: list[str] | None = None, admin_token: str | None = None, **overrides: Any) -> GatewaySettings:
    """GatewaySettings from an environment, flags overriding it (no env: BreakerPolicy defaults)."""
    from chaos.env.model import BreakerPolicy
    from chaos.shared.signing import key_from_env
    from chaos.stack.gateway import GatewaySettings, parse_replica

    policy = env.breaker.model_copy() if env else BreakerPolicy()
    for key in ("canary_weight", "window_s", "min_calls", "open_wait_s", "hmac_key_env", "normalize_unicode"):
        if overrides.get(key) is not None:
            setattr(policy, key, overrides[key])
    if stable or canary:
        replicas = [parse_replica(s, "stable", i) for i, s in enumerate(stable or [], 1)]
        replicas += [parse_replica(s, "canary", i) for i, s in enumerate(canary or [], 1)]
    else:
        replicas = replicas_from_env(env) if env else []
    gw = env.gateway if env else None
    extra = {k: overrides[k] for k in ("leak_hour_s", "scrape_interval_s", "hmac_window_s") if overrides.get(k)}
    if env is not None and "leak_hour_s" not in extra:
        extra["leak_hour_s"] = 3600.0 * env.time_scale  # the leak rule's hour is compressed with the env
    if gw is not None:
        extra.update(eject_after=gw.reference.eject_after, eject_s=gw.reference.eject_s,
                     progress_eject_s=gw.reference.progress_eject_s)
    if env is not None:
        extra["overload_statuses"] = frozenset(env.retry.overload_statuses)
    extra.update({k: overrides[k] for k in ("eject_after", "eject_s", "progress_eject_s") if overrides.get(k) is not None})
    return GatewaySettings(
        replicas=replicas, policy=policy, listen=listen or (gw.listen if gw else "127.0.0.1:18100"),
        admin_token=admin_token or (gw.admin_token if gw else None),
        hmac_key=key_from_env(policy.hmac_key_env) if policy.hmac_key_env else None, **extra)


def _admin_call(env_name: str | None, url: str | None, token: str | None, method: str, path: str,
                body: dict[str, Any] | None = None) -> dict[str, Any]:
    env = load(env_name or "") if env_name or not url else None  # "": load's own error for no --env
    if url is None:
        assert env is not None
        url = env.endpoints.gateway_admin or (f"http://{env.gateway.listen}" if env.gateway else None)
        if url is None:
            raise ConfigError(f"environment {env.name!r}: no endpoints.gateway_admin or gateway.listen to reach")
    token = token or (env.gateway.admin_token if env and env.gateway else None)
    req = urllib.request.Request(url.rstrip("/") + path, method=method,
                                 data=json.dumps(body or {}).encode() if method == "POST" else None,
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer: dict[str, Any] = json.loads(resp.read() or b"{}")
            return answer
    except urllib.error.HTTPError as e:
        raise StackError(f"gateway admin {url}{path}: HTTP {e.code}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        raise StackError(f"gateway admin {url}{path}: {getattr(e, 'reason', e)}") from None


@gw_app.callback(invoke_without_command=True)
def gateway(
    ctx: typer.Context,
    env: str | None = OPTIONAL_ENV_OPTION,
    listen: str | None = typer.Option(None, help="HOST:PORT to listen on"),
    stable: list[str] | None = typer.Option(None, help="[NAME=]URL of a stable replica (repeatable)"),
    canary: list[str] | None = typer.Option(None, help="[NAME=]URL of a canary replica (repeatable)"),
    admin_token: str | None = typer.Option(None, envvar="CHAOS_GATEWAY_TOKEN", help="Bearer token for /admin"),
    canary_weight: float | None = typer.Option(None, min=0.0, max=1.0),
    window_s: float | None = typer.Option(None, min=0.001),
    min_calls: int | None = typer.Option(None, min=1),
    open_wait_s: float | None = typer.Option(None, min=0.0),
    hmac_key_env: str | None = typer.Option(None, help="name of the env var holding the HMAC key"),
    normalize: bool | None = typer.Option(None, "--normalize/--no-normalize", help="NFKC prompts"),
    leak_hour_s: float | None = typer.Option(None, min=0.001, help="real seconds that count as an hour (leak rule)"),
    scrape_interval_s: float | None = typer.Option(None, min=0.05),
    eject_after: int | None = typer.Option(None, min=0, help="failed attempts in a row that take a replica out of "
                                                            "rotation (0: never)"),
    eject_s: float | None = typer.Option(None, min=0.001, help="how long a replica taken out stays out"),
    progress_eject_s: float | None = typer.Option(None, min=0.0, help="seconds a replica may hold running requests "
                                                                     "while decoding nothing before it is taken out (0: never)"),
    log_level: str = typer.Option("INFO"),
) -> None:
    """Run the gateway from an environment (--env) or from explicit --stable/--canary URLs."""
    if ctx.invoked_subcommand is not None:
        return
    from chaos.stack.gateway import run

    e = load(env or "") if env or not (stable or canary) else None  # "": load's own error for no --env
    settings = settings_from(e, listen=listen, stable=stable, canary=canary, admin_token=admin_token,
                             canary_weight=canary_weight, window_s=window_s, min_calls=min_calls,
                             open_wait_s=open_wait_s, hmac_key_env=hmac_key_env, normalize_unicode=normalize,
                             leak_hour_s=leak_hour_s, scrape_interval_s=scrape_interval_s, eject_after=eject_after,
                             eject_s=eject_s, progress_eject_s=progress_eject_s)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run(settings)


@gw_app.command("reset")
def reset(
    env: str | None = OPTIONAL_ENV_OPTION,
    url: str | None = typer.Option(None, help="gateway base URL (default: from the environment)"),
    pool: str | None = typer.Option(None, help="stable or canary (default: both)"),
    token: str | None = typer.Option(None, envvar="CHAOS_GATEWAY_TOKEN"),
) -> None:
    """Close the breakers (ends a degrade or a forced rollback)."""
    out = _admin_call(env, url, token, "POST", "/admin/reset", {"pool": pool} if pool else {})
    typer.echo(" ".join(f"{p}={s['state']}" for p, s in out.get("state", {}).items()))


@gw_app.command("state")
def state(
    env: str | None = OPTIONAL_ENV_OPTION,
    url: str | None = typer.Option(None),
    token: str | None = typer.Option(None, envvar="CHAOS_GATEWAY_TOKEN"),
) -> None:
    """Print the gateway's state as JSON."""
    typer.echo(json.dumps(_admin_call(env, url, token, "GET", "/admin/state"), indent=2))


def register(app: typer.Typer) -> None:
    app.add_typer(gw_app, name="gateway")
