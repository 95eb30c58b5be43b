"""Validation errors of a hand-written YAML file as lines a person can act on: `file:line: field: problem`.

Every error is listed (sorted by line), a list item with a `name` is named by it rather than by its
index (`targets[gpu-1].restart_policy`, not `targets.0.restart_policy`), and a value that failed
every member of a union is one line, not one per member. Environment files, game-day plans and fault
schedules all go through here."""
from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from chaos.errors import ConfigError

Loc = tuple[str | int, ...]


class FieldProblems(ValueError):
    """Several problems one model validator found, each at its own place (a pydantic-style location)."""

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(msg for _, msg in problems))
        self.problems = problems


def compose(text: str, path: str | Path) -> tuple[yaml.Node | None, Any]:
    """(node tree, plain data) of `text`; a syntax error is one ConfigError line with its line number."""
    try:
        node = yaml.compose(text)
        _no_duplicate_keys(node, path)
        return node, yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise ConfigError(f"{path}{f':{mark.line + 1}' if mark else ''}: YAML syntax error: "
                          f"{(e.problem or e.context or 'syntax error').strip()}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: YAML error: {str(e).splitlines()[0]}") from None


def _no_duplicate_keys(node: yaml.Node | None, path: str | Path) -> None:
    """A key written twice in one mapping is an error: YAML would keep the later value without a word."""
    todo = [node] if node is not None else []
    while todo:
        n = todo.pop()
        if isinstance(n, yaml.MappingNode):
            first: dict[str, int] = {}
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else None
                if isinstance(key, str) and key != "<<":
                    if key in first:
                        raise ConfigError(f"{path}:{k.start_mark.line + 1}: {key}: written twice (first at line "
                                          f"{first[key]}): expected each key once, a later one would silently win")
                    first[key] = k.start_mark.line + 1
                todo.append(v)
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)


def line_of(node: yaml.Node | None, loc: Loc) -> int | None:
    """The 1-based line of the YAML node at pydantic location `loc` (the deepest one found)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _in_data(raw: Any, loc: Loc) -> tuple[Loc, str]:
    """(loc cut where the data ends, its field path with named list items): pydantic appends a union
    member's tag (`gpus.int`) after a scalar, which is no place in the file."""
    cur, kept, field = raw, [], ""
    for key in loc:
        if isinstance(cur, dict):
            shown = key if isinstance(key, str) and key.isprintable() and key.strip() == key != "" else repr(key)
            field += f".{shown}" if field else shown
            cur = cur.get(key)
        elif isinstance(cur, list) and isinstance(key, int):
            item = cur[key] if 0 <= key < len(cur) else None
            name = item.get("name") if isinstance(item, dict) else None
            field += f"[{name}]" if isinstance(name, str) and name else f"[{key}]"
            cur = item
        else:
            break
        kept.append(key)
    return tuple(kept), field or "(top level)"


def _one_line(text: str) -> str:
    """`text` with every character that would break the line escaped (a key may hold a newline)."""
    return "".join(repr(c)[1:-1] if len(f"a{c}a".splitlines()) > 1 else c for c in text)


def _found(value: Any) -> str:
    s = "a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list) else repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def error_lines(path: str | Path, node: yaml.Node | None, raw: Any, err: ValidationError) -> list[str]:
    """One `file:line: field: problem` line per error in `err`, in file order."""
    merged: dict[Loc, tuple[str, list[str], Any]] = {}  # loc -> (field, problems, value found)
    for e in err.errors():
        found_problems = getattr((e.get("ctx") or {}).get("error"), "problems", None)
        parts = ([(tuple(e["loc"]) + tuple(sub), msg) for sub, msg in found_problems] if found_problems
                 else [(tuple(e["loc"]), _problem(e))])
        for full, problem in parts:
            loc, field = _in_data(raw, full)
            if e["type"] not in ("missing", "extra_forbidden", "value_error") and loc == full[:len(loc)]:
                value = e.get("input")
            else:
                value = None
            probs = merged.setdefault(loc, (field, [], value))[1]
            if problem not in probs:
                probs.append(problem)
    out = []
    for loc, (field, probs, value) in merged.items():
        line = line_of(node, loc if loc and not _is_missing(raw, loc) else loc[:-1])
        what = " or ".join(probs) + (f"; found {_found(value)}" if value is not None else "")
        out.append((line or 0, _one_line(f"{path}{f':{line}' if line else ''}: {field}: {what}")))
    return [text for _, text in sorted(out, key=lambda x: x[0])]


def _is_missing(raw: Any, loc: Loc) -> bool:
    """Whether `loc` is absent from the data (a missing field lives on its parent's line)."""
    cur = raw
    for key in loc:
        if isinstance(cur, dict) and key in cur:
            cur = cur[key]
        elif isinstance(cur, list) and isinstance(key, int) and 0 <= key < len(cur):
            cur = cur[key]
        else:
            return True
    return False


def _problem(e: Any) -> str:
    kind = e["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    return str(e["msg"]).removeprefix("Value error, ")


def raise_for(path: str | Path, node: yaml.Node | None, raw: Any, err: ValidationError) -> NoReturn:
    """The whole of `err` as one ConfigError, one line per problem."""
    raise ConfigError("\n".join(error_lines(path, node, raw, err))) from None
