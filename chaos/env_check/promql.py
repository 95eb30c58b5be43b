"""The metric names a PromQL expression reads, by a tokenizer (no PromQL library is installed, and promtool
parses but does not list them): every bare identifier that is not a keyword, a function or aggregation
called by it, a label name, or a grouping list; and every `{__name__="..."}`. Strings, durations, numbers
and comments are skipped, so a metric named in a label's value is no metric read."""
from __future__ import annotations

import re

# identifiers PromQL gives a meaning of its own (case-insensitive), never a metric where they stand
KEYWORDS = {"and", "or", "unless", "atan2", "by", "without", "on", "ignoring", "group_left", "group_right", "offset",
            "bool", "inf", "nan"}
# an aggregation may take its grouping before its argument: `sum by (pool) (x)`
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
                "topk", "quantile", "limitk", "limit_ratio"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}  # a list of label names follows
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?[A-Za-z0-9_]*)")
_NAME_MATCHER = re.compile(r"""(?<![A-Za-z0-9_])__name__\s*=\s*(["'`])(.*?)\1""")


def _string_end(expr: str, i: int) -> int:
    """The index after the string literal opening at `i` (backslash escapes, except in `raw` strings)."""
    quote, j = expr[i], i + 1
    while j < len(expr) and expr[j] != quote:
        j += 2 if quote != "`" and expr[j] == "\\" else 1
    return j + 1


def _group_end(expr: str, i: int, close: str) -> int:
    """The index after the bracket that closes the one at `i`, strings skipped."""
    opening, depth, j = expr[i], 0, i
    while j < len(expr):
        c = expr[j]
        if c in "\"'`":
            j = _string_end(expr, j)
            continue
        depth += (c == opening) - (c == close)
        j += 1
        if depth == 0:
            break
    return j


def _skip(expr: str, i: int) -> int:
    """The index of the next token at or after `i` (spaces and comments skipped)."""
    while i < len(expr) and (expr[i].isspace() or expr[i] == "#"):
        if expr[i] == "#":
            end = expr.find("\n", i)
            i = len(expr) if end < 0 else end
        i += 1
    return i


def metric_names(expr: str) -> list[str]:
    """The metric names `expr` reads, in order of first appearance."""
    names: list[str] = []
    i, after_grouping = 0, False
    while i < len(expr):
        c = expr[i]
        if c.isspace() or c == "#":
            i = _skip(expr, i)
        elif c in "\"'`":
            i = _string_end(expr, i)
        elif c == "{":  # label matchers: names there are labels; only __name__="x" names a metric
            end = _group_end(expr, i, "}")
            names += [m.group(2) for m in _NAME_MATCHER.finditer(expr[i:end])]
            i = end
        elif c == "[":  # a range or a subquery's durations
            i = _group_end(expr, i, "]")
        elif c == "(" and after_grouping:  # by (pool, instance): label names
            i, after_grouping = _group_end(expr, i, ")"), False
        elif c.isdigit() or (c == "." and i + 1 < len(expr) and expr[i + 1].isdigit()):
            m = _NUMBER.match(expr, i)
            i = m.end() if m else i + 1
        elif (m := _IDENT.match(expr, i)) is not None:
            word, i = m.group(0), m.end()
            lower, j = word.lower(), _skip(expr, i)
            after_grouping = lower in GROUPING
            following = _IDENT.match(expr, j)
            grouped = following is not None and following.group(0).lower() in ("by", "without")
            if lower in KEYWORDS or expr[j:j + 1] == "(" or (lower in AGGREGATIONS and grouped):
                continue
            names.append(word)
        else:
            i += 1
    return list(dict.fromkeys(names))
