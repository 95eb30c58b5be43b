"""`python -m chaos.stack.gateway --stable URL --canary URL ...`: the reference gateway's own entry point, from flags
alone (`chaos gateway --env FILE` builds the same settings from an environment file)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import replace

from chaos.errors import ChaosError, ConfigError
from chaos.shared.signing import key_from_env
from chaos.stack.gateway.app import GatewaySettings, run
from chaos.stack.gateway.proxy import parse_replica
from chaos.stack.gateway.rules import DefaultRules


def parse(argv: list[str]) -> tuple[GatewaySettings, str]:
    """The settings (and the log level) that the flags describe."""
    p = argparse.ArgumentParser(prog="python -m chaos.stack.gateway", description=__doc__)
    p.add_argument("--listen", default="127.0.0.1:18100", help="HOST:PORT to listen on")
    p.add_argument("--stable", action="append", default=[], help="[NAME=]URL of a stable replica (repeatable)")
    p.add_argument("--canary", action="append", default=[], help="[NAME=]URL of a canary replica (repeatable)")
    p.add_argument("--admin-token", default=os.environ.get("CHAOS_GATEWAY_TOKEN"), help="Bearer token for /admin")
    p.add_argument("--canary-weight", type=float)
    p.add_argument("--window-s", type=float)
    p.add_argument("--min-calls", type=int)
    p.add_argument("--open-wait-s", type=float)
    p.add_argument("--hmac-key-env", help="name of the env var holding the HMAC key")
    p.add_argument("--normalize", dest="normalize_unicode", action="store_true", default=None, help="NFKC prompts")
    p.add_argument("--no-normalize", dest="normalize_unicode", action="store_false")
    p.add_argument("--leak-hour-s", type=float, help="real seconds that count as an hour (leak rule)")
    p.add_argument("--scrape-interval-s", type=float)
    p.add_argument("--eject-after", type=int, default=0, help="failed attempts in a row that take a replica out of "
                   "rotation (0: never)")
    p.add_argument("--eject-s", type=float, default=10.0, help="how long a replica taken out stays out")
    p.add_argument("--progress-eject-s", type=float, default=0.0, help="seconds a replica may hold running requests "
                   "while decoding nothing before it is taken out of rotation (0: never)")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    rules = replace(DefaultRules(), **{k: getattr(a, k) for k in (
        "canary_weight", "window_s", "min_calls", "open_wait_s", "hmac_key_env", "normalize_unicode")
        if getattr(a, k) is not None})
    replicas = [parse_replica(s, "stable", i) for i, s in enumerate(a.stable, 1)]
    replicas += [parse_replica(s, "canary", i) for i, s in enumerate(a.canary, 1)]
    extra = {k: getattr(a, k) for k in ("leak_hour_s", "scrape_interval_s") if getattr(a, k)}
    if a.progress_eject_s < 0:
        raise ConfigError(f"--progress-eject-s {a.progress_eject_s}: expected seconds >= 0 (0: off)")
    if a.eject_after < 0 or a.eject_s <= 0:
        raise ConfigError(f"--eject-after {a.eject_after} / --eject-s {a.eject_s}: expected a count >= 0 and "
                          "seconds > 0")
    return GatewaySettings(replicas=replicas, policy=rules, listen=a.listen, admin_token=a.admin_token,
                           hmac_key=key_from_env(rules.hmac_key_env) if rules.hmac_key_env else None,
                           eject_after=a.eject_after, eject_s=a.eject_s, progress_eject_s=a.progress_eject_s,
                           **extra), a.log_level


def main(argv: list[str] | None = None) -> int:
    """Run the gateway until it is stopped; a ChaosError is one line on stderr and exit code 2."""
    try:
        settings, level = parse(sys.argv[1:] if argv is None else argv)
        logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
        run(settings)
    except ChaosError as e:
        print(f"chaos gateway: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
