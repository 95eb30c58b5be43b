"""Find, read, expand and validate environment files; every failure is one ConfigError line."""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from chaos.env import schema_errors
from chaos.env.model import Environment
from chaos.errors import ConfigError

# the environments the wheel carries (`local`, the embedded default: links to environments/ in the clone)
BUILTIN_DIR = Path(__file__).parent / "builtin"
CHECKOUT = Path(__file__).resolve().parents[2]  # the llm-chaos checkout this package runs from (`make setup-vllm`'s .tools)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def environments_dir() -> Path:
    """The environments/ folder: $CHAOS_ENV_DIR, else the nearest one above the working dir."""
    if os.environ.get("CHAOS_ENV_DIR"):
        return Path(os.environ["CHAOS_ENV_DIR"])
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "environments").is_dir():
            return d / "environments"
    return here / "environments"


def available(env_dir: Path | None = None) -> list[str]:
    """Names of the environments found in env_dir."""
    d = env_dir or environments_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def resolve_path(name_or_path: str, env_dir: Path | None = None) -> Path:
    """Turn a name from environments/ or a path to a YAML file into a path."""
    if not name_or_path or not name_or_path.strip():
        raise ConfigError("--env: expected an environment name or a path to a YAML file, got ''")
    looks_like_path = os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml"))
    if looks_like_path:
        p = Path(name_or_path)
        if not p.exists():
            raise ConfigError(f"{p}: environment file not found")
        return p
    d = env_dir or environments_dir()
    p = d / f"{name_or_path}.yaml"
    if not p.exists() and env_dir is None and (BUILTIN_DIR / f"{name_or_path}.yaml").is_file():
        return BUILTIN_DIR / f"{name_or_path}.yaml"  # no environments/ file of that name: the one the wheel carries
    if not p.exists():
        names = ", ".join(available(d)) or f"none in {d}"
        raise ConfigError(f"--env {name_or_path}: unknown environment (available: {names})")
    return p


class UnsetVariable(ConfigError):
    """A ${VAR} without a value or default; `loc` is where it is written (for the file's line)."""

    def __init__(self, message: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.loc = loc


Loc = tuple[str | int, ...]


def unused_here(raw: dict[str, Any]) -> Callable[[Loc], str | None]:
    """Where in this file a value is never read by the harness, and why (None: it is read). A replica's
    `env` is passed only to a replica the harness starts; with embedded: none it starts none."""
    embedded = raw.get("embedded", "none")

    def why(loc: Loc) -> str | None:
        if embedded == "none" and len(loc) >= 4 and loc[0] == "targets" and loc[2] == "env":
            return ("embedded: none, so the harness starts no replica and never passes a target's env "
                    "(the running container has its own)")
        return None
    return why


def expand_vars(value: Any, environ: Mapping[str, str], where: str = "", *, loc: Loc = (),
                unused: Callable[[Loc], str | None] | None = None, dropped: list[str] | None = None) -> Any:
    """Replace ${VAR} and ${VAR:-default} in every string, recursively. A value with an unset variable
    where `unused` says the harness never reads it is left out (and noted in `dropped`), not an error."""
    kw: dict[str, Any] = {"unused": unused, "dropped": dropped}
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise UnsetVariable(f"{where or 'value'}: environment variable ${{{name}}} is not set", loc)
        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            at = f"{where}.{k}" if where else str(k)
            try:
                out[k] = expand_vars(v, environ, at, loc=(*loc, k), **kw)
            except UnsetVariable as e:
                why = unused((*loc, k)) if unused is not None else None
                if why is None:
                    raise
                if dropped is not None:
                    dropped.append(f"{at}: {str(e).rsplit(': ', 1)[-1]}, and it is not needed: {why}")
        return out
    if isinstance(value, list):  # a named item by its name, as schema errors name it
        return [expand_vars(v, environ, f"{where}[{_name_or(v, i)}]", loc=(*loc, i), **kw) for i, v in enumerate(value)]
    return value


def _name_or(item: Any, index: int) -> str | int:
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) and name else index


_LOOPBACK_PORT = re.compile(r"((?:^|//|\b)(?:127\.\d+\.\d+\.\d+|localhost)):(\d+)")
PORT_OFFSET_VAR = "CHAOS_PORT_OFFSET"


def port_offset(environ: Mapping[str, str], where: str) -> int:
    """$CHAOS_PORT_OFFSET as an int (0 when unset); a bad value is a one-line ConfigError."""
    raw = environ.get(PORT_OFFSET_VAR, "").strip()
    if not raw:
        return 0
    if not raw.lstrip("-").isdigit() or not -20000 <= int(raw) <= 20000:
        raise ConfigError(f"{where}: ${PORT_OFFSET_VAR} must be an integer between -20000 and 20000, got {raw!r}")
    return int(raw)


def shift_ports(value: Any, offset: int, key: str = "") -> Any:
    """Every loopback port of an environment moved by `offset`, so two stacks can share one machine.

    Only 127.x.x.x / localhost addresses and the `port` / `rank_ports` fields move: a remote host's
    ports are that host's business."""
    if isinstance(value, dict):
        host = str(value.get("host", "127.0.0.1"))
        local = host == "localhost" or host.startswith("127.")
        return {k: shift_ports(v, offset, str(k)) if local or k not in ("port", "rank_ports") else v
                for k, v in value.items()}
    if isinstance(value, list):
        return [shift_ports(v, offset, key) for v in value]
    if isinstance(value, str):
        return _LOOPBACK_PORT.sub(lambda m: f"{m.group(1)}:{int(m.group(2)) + offset}", value)
    if isinstance(value, int) and not isinstance(value, bool) and key in ("port", "rank_ports"):
        return value + offset
    return value


def parse(text: str, source: str | Path, environ: Mapping[str, str] | None = None) -> Environment:
    """Parse YAML text into an Environment; errors name `source`."""
    path = Path(source)
    node, raw = schema_errors.compose(text, path)  # the nodes give each schema error its line
    if raw is None:
        raise ConfigError(f"{path}: file is empty; expected a mapping with at least 'name' and 'endpoints'")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, found {type(raw).__name__}")
    environ = os.environ if environ is None else environ
    dropped: list[str] = []
    try:
        raw = expand_vars(raw, environ, unused=unused_here(raw), dropped=dropped)
    except UnsetVariable as e:
        line = schema_errors.line_of(node, e.loc)
        raise ConfigError(f"{path}{f':{line}' if line else ''}: {e}") from None
    raw.setdefault("name", path.stem)
    offset = port_offset(environ, str(path))
    if offset:  # a shifted stack keeps its own state (pidfiles, logs, ledger)
        raw = shift_ports(raw, offset)
        raw["state_dir"] = f"{raw.get('state_dir', '.state')}-port{offset:+d}"
    try:
        env = Environment.model_validate(raw)
    except ValidationError as e:
        schema_errors.raise_for(path, node, raw, e)
    except (TypeError, ValueError) as e:  # a validator hit something odd, e.g. unhashable keys
        raise ConfigError(f"{path}: invalid value: {str(e).splitlines()[0]}") from None
    if path.parent == BUILTIN_DIR:
        # never inside the installed package; the same for every process and working directory
        env.state_dir = str(builtin_state_root(environ) / Path(env.state_dir).name)
        env._source = str(path)  # not the link's target: a child process loads the built-in again
    else:
        env.state_dir = str(state_dir_for(env.state_dir, path))
        env._source = str(path.resolve()) if path.exists() else str(path)
    env._unset_unused = dropped
    if env.monitoring is not None:  # rule files are taken from the folder of the file (a built-in's link: its target)
        real = path.resolve() if path.exists() else path
        env.monitoring.rule_files = [str(state_dir_for(f, real)) for f in env.monitoring.rule_files]
    folder = (path.resolve() if path.exists() else path).parent
    for t in env.targets:
        if t.vllm is not None and t.kind == "process":  # a container's model path is the image's, not this host's
            t.vllm.serve, t.vllm.model = vllm_path(t.vllm.serve, folder), vllm_path(t.vllm.model, folder)
    return env


def vllm_path(value: str, folder: Path) -> str:
    """A process target's relative `vllm.serve` or `vllm.model` path, made absolute where it exists: from the working directory,
    else the environment file's folder, else the llm-chaos checkout (the defaults, `make setup-vllm`'s .tools),
    so that a run from another directory (a team's own suite project) starts the same vLLM. Anything not found
    is left as written: a model name for vLLM to fetch, or a missing install `chaos env check` names."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return value
    try:
        here = [Path.cwd()]
    except OSError:  # a working directory removed under us: only the file's folder and the checkout
        here = []
    for base in (*here, folder, CHECKOUT):
        if (base / p).exists():
            return str(base / p)  # not resolved: a link to a venv's program must stay the link
    return value


def builtin_state_root(environ: Mapping[str, str]) -> Path:
    """Where a built-in environment keeps its state (pidfiles, logs, ledger): $XDG_STATE_HOME/llm-chaos,
    else ~/.local/state/llm-chaos."""
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "llm-chaos"


def state_dir_for(state_dir: str, source: str | Path) -> Path:
    """The absolute state directory of a file's environment: a relative `state_dir` is taken from the
    file's folder, so every command finds the same ledger and STOP file from any working directory."""
    p = Path(state_dir).expanduser()
    return p if p.is_absolute() else (Path(source).parent.resolve() / p).resolve()


def load(name_or_path: str, env_dir: Path | None = None, environ: Mapping[str, str] | None = None) -> Environment:
    """Load and validate an environment by name or path."""
    p = resolve_path(name_or_path, env_dir)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e).splitlines()[0]
        raise ConfigError(f"{p}: cannot read environment file: {reason}") from None
    return parse(text, p, environ)
