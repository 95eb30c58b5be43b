"""Address fields of an environment file: HOST:PORT, http:// URLs, Docker hosts, ssh:// load hosts.

Each check returns the value unchanged or raises a ValueError that says what was expected and what
was found, so `ssh://deploy@` or a port of 84430 is refused when the file is read, not mid-run."""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

DOCKER_FORMS = "ssh://[user@]host[:port][/socket-path], unix:///path or tcp://host:port"
# [user@]host[:port][/rest]; a bracketed IPv6 host keeps its colons
_AUTHORITY = re.compile(r"^(?:(?P<user>[^@/]*)@)?(?P<host>\[[0-9A-Fa-f:.]*\]|[^@/:\[\]]*)(?::(?P<port>[^/]*))?(?P<rest>/.*)?$")


def _port_problem(port: str) -> str | None:
    """Why `port` is not a TCP port (None when it is one)."""
    if not port.isdigit():
        return f"port {port!r} is not a number" if port else "the port is empty"
    if not 1 <= int(port) <= 65535:
        return f"port {int(port)} is outside 1-65535"
    return None


def _authority_problem(text: str, *, port_required: bool, user_allowed: bool, path_allowed: bool) -> str | None:
    """Why `[user@]host[:port][/path]` is malformed (None when it is fine)."""
    m = _AUTHORITY.match(text)
    if not m:
        return "it is not [user@]host[:port]"
    user, host, port, rest = m.group("user"), m.group("host"), m.group("port"), m.group("rest")
    if user is not None and not user_allowed:
        return "no user@ belongs here"
    if user is not None and not user:
        return "the user before '@' is empty"
    if not host or host == "[]":
        return f"no host after '{user}@'" if user else "no host"
    if port is None and port_required:
        return "no port"
    if port is not None and (why := _port_problem(port)):
        return why
    if rest and not path_allowed:
        return f"unexpected path {rest!r}"
    return None


def host_port(value: str) -> str:
    """HOST:PORT with a port 1-65535 (a Toxiproxy or fault proxy listen/upstream, a gateway's listen)."""
    why = ("it has a scheme; give HOST:PORT without it" if "://" in value
           else _authority_problem(value, port_required=True, user_allowed=False, path_allowed=False))
    if why:
        raise ValueError(f"expected HOST:PORT with a port 1-65535, found {value!r} ({why})")
    return value


def http_url(value: str) -> str:
    """An http:// or https:// URL with a host and, when it names one, a port 1-65535."""
    scheme, sep, rest = value.partition("://")
    why = None
    if not sep or scheme not in ("http", "https"):
        why = "no http:// or https:// scheme"
    else:
        authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
        why = _authority_problem(authority, port_required=False, user_allowed=True, path_allowed=False)
    if why:
        raise ValueError(f"expected an http:// URL (http://host[:port][/path], port 1-65535), found {value!r} ({why})")
    return value


def docker_host(value: str) -> str:
    """ssh://[user@]host[:port][/socket-path], unix:///path or tcp://host:port, as Docker reads DOCKER_HOST."""
    scheme, sep, rest = value.partition("://")
    if not sep:
        why: str | None = "no scheme; a remote engine is ssh://host"
    elif scheme == "ssh":
        why = _authority_problem(rest, port_required=False, user_allowed=True, path_allowed=True)
    elif scheme == "unix":
        why = None if rest.startswith("/") and rest.strip("/") else "expected an absolute socket path after unix://"
    elif scheme == "tcp":
        why = _authority_problem(rest.rstrip("/"), port_required=True, user_allowed=False, path_allowed=False)
    else:
        why = f"unknown scheme {scheme + '://'!r}"
    if why:
        raise ValueError(f"expected {DOCKER_FORMS}, found {value!r} ({why})")
    return value


def worker_host(value: str) -> str:
    """An ssh:// load host is ssh://[user@]host[:port]; `local` and lab host names are checked where used."""
    if value.startswith("ssh://"):
        why = _authority_problem(value[len("ssh://"):].rstrip("/"), port_required=False, user_allowed=True,
                                 path_allowed=False)
        if why:
            raise ValueError(f"expected ssh://[user@]host[:port], found {value!r} ({why})")
    return value


HostPort = Annotated[str, AfterValidator(host_port)]
HttpUrl = Annotated[str, AfterValidator(http_url)]
DockerHost = Annotated[str, AfterValidator(docker_host)]
WorkerHost = Annotated[str, AfterValidator(worker_host)]
