"""Admin tokens by reference: the ledger, logs and reports record where a token comes from, never its value."""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.errors import ConfigError

STACK_TOKEN_FILE = "admin.token"


@dataclass(frozen=True)
class TokenRef:
    """Where an admin token lives: an environment variable, a file (first line), a field of an environment
    file (`config` = (environment source, dotted field), e.g. the gateway's admin_token), or a literal."""

    env: str | None = None
    file: str | None = None
    literal: str | None = None
    config: tuple[str, str] | None = None

    def value(self) -> str:
        """The token itself; ConfigError naming the source when it is missing."""
        if self.literal:
            return self.literal
        if self.config:
            return self._from_config(*self.config)
        if self.env:
            val = os.environ.get(self.env)
            if not val:
                raise ConfigError(f"admin token: environment variable {self.env} is not set")
            return val
        if self.file:
            try:
                val = Path(self.file).read_text(encoding="utf-8").strip().splitlines()[0].strip()
            except (OSError, IndexError):
                raise ConfigError(f"admin token: cannot read a token from {self.file}") from None
            if not val:
                raise ConfigError(f"admin token: {self.file} is empty")
            return val
        raise ConfigError("admin token: no source (give an environment variable or a token file)")

    @staticmethod
    def _from_config(source: str, dotted: str) -> str:
        from chaos.env import load

        obj: Any = load(source)
        for part in dotted.split("."):
            obj = getattr(obj, part, None)
        if not obj:
            raise ConfigError(f"admin token: environment {source} has no {dotted}")
        return str(obj)

    def describe(self) -> dict[str, Any]:
        """What the ledger may record: the source only."""
        if self.config:
            return {"config": list(self.config)}
        if self.env:
            return {"env": self.env}
        if self.file:
            return {"file": self.file}
        return {"literal": "<redacted>"}

    def header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.value()}"}

    def __repr__(self) -> str:  # a repr lands in Allure steps and tracebacks
        return f"TokenRef({self.describe()})"


def as_ref(token: str | TokenRef) -> TokenRef:
    """A TokenRef from a TokenRef or a plain string (which is kept out of every record)."""
    return token if isinstance(token, TokenRef) else TokenRef(literal=token)


def from_record(auth: dict[str, Any] | None) -> TokenRef | None:
    """The TokenRef an undo step recorded (None when it recorded none or a redacted literal)."""
    if not auth or auth.get("literal"):
        return None
    config = auth.get("config")
    return TokenRef(env=auth.get("env"), file=auth.get("file"), config=tuple(config) if config else None)


def token_file(path: str | os.PathLike[str]) -> TokenRef:
    """A token file, created 0600 with a random token when missing (kept when another process made it first)."""
    path = Path(path).resolve()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process of the run made it first
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(24) + "\n")
    return TokenRef(file=str(path))


def stack_token(state_dir: str | os.PathLike[str]) -> TokenRef:
    """The embedded stack's admin token file (created 0600 with a random token on first use)."""
    return token_file(Path(state_dir) / STACK_TOKEN_FILE)
