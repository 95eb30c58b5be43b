"""The prose stays readable: a short README, a changelog of one- or two-line entries, a plain CI script,
and comments in the package that say why the code is so, not which run or commit found it."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
README_HEAD_LINES = 20
COMMANDS = ("make gameday", "make test")
CHANGELOG_ENTRY_MAX_LINES = 2
CI_RUN_MAX_LINES = 60
COMMENTED_TREES = ("chaos", "chaos_engine_plugin", "suites")

# a commit id: a standalone 7-12 character lowercase hex word holding both a digit and a letter
_COMMIT = re.compile(r"(?<![\w-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w-])")
# a numbered run or stop, or a fresh-clone run: lab-notebook history, not a reason
_RUN = re.compile(r"\b(?:runs? \d+|stops? \d+|fresh-clone (?:runs?|e2e|ci|lanes?))\b", re.IGNORECASE)


def readme_problems(text: str) -> list[str]:
    lines = text.splitlines()
    problems = [f"README.md has {len(lines)} lines, at most {README_MAX_LINES}"] if len(lines) > README_MAX_LINES else []
    head = "\n".join(lines[:README_HEAD_LINES])
    problems += [f"README.md: `{c}` is not in its first {README_HEAD_LINES} lines" for c in COMMANDS
                 if not re.search(re.escape(c) + r"(?![\w-])", head)]
    return problems


def changelog_problems(text: str) -> list[str]:
    """Each bullet with its continuation lines (indented, up to a blank line, heading or next bullet)."""
    problems: list[str] = []
    start, length = 0, 0
    for n, line in enumerate([*text.splitlines(), ""], 1):
        if length and (not line.strip() or not line.startswith(" ")):
            if length > CHANGELOG_ENTRY_MAX_LINES:
                problems.append(f"CHANGELOG.md:{start}: an entry of {length} lines, at most {CHANGELOG_ENTRY_MAX_LINES}")
            length = 0
        if re.match(r"[-*] ", line):
            start, length = n, 1
        elif length:
            length += 1
    return problems


def ci_run_problems(text: str) -> list[str]:
    n = len(text.splitlines())
    return [f".ci/run has {n} lines, at most {CI_RUN_MAX_LINES}"] if n > CI_RUN_MAX_LINES else []


def _comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every `#` comment and every docstring of a module."""
    found: list[tuple[int, str]] = []
    previous = tokenize.INDENT
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and previous in (tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT):
            found.append((tok.start[0], tok.string))  # a string standing alone as a statement: a docstring
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok.type
    return found


def comment_problems(name: str, source: str) -> list[str]:
    problems = []
    for line, text in _comments(source):
        for pattern, what in ((_COMMIT, "a commit id"), (_RUN, "a run log")):
            if m := pattern.search(text):
                problems.append(f"{name}:{line + text[:m.start()].count(chr(10))}: cites {what} ({m.group(0)!r})")
    return problems


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    assert readme_problems((REPO / "README.md").read_text(encoding="utf-8")) == []


def test_changelog_entries_are_one_or_two_lines() -> None:
    assert changelog_problems((REPO / "CHANGELOG.md").read_text(encoding="utf-8")) == []


def test_ci_run_is_a_short_list_of_steps() -> None:
    assert ci_run_problems((REPO / ".ci" / "run").read_text(encoding="utf-8")) == []


def test_comments_say_why_not_which_run_or_commit() -> None:
    problems = [p for tree in COMMENTED_TREES for f in sorted((REPO / tree).rglob("*.py"))
                for p in comment_problems(str(f.relative_to(REPO)), f.read_text(encoding="utf-8"))]
    assert problems == []


def test_the_checks_bite() -> None:
    assert readme_problems("# x\n" * 251 + "make gameday\n")  # too long, and the commands come too late
    assert readme_problems("make gameday\n")  # `make test` missing
    assert not readme_problems("make gameday\nmake test\n")
    assert changelog_problems("## [0.1.0]\n### Added\n- one\n  two\n  three\n")
    assert not changelog_problems("### Added\n- one\n  two\n- three\n\n- four\n")
    assert ci_run_problems("step\n" * 61)
    assert comment_problems("m.py", "x = 1  # fixed in 0bad144\n")
    assert comment_problems("m.py", 'def f() -> None:\n    """Seen in the fresh-clone run of the lab."""\n')
    assert comment_problems("m.py", "# measured in runs 11 and 12\n")
    assert comment_problems("m.py", "# stop 39 took longer\n")
    assert comment_problems("m.py", "# measured in a fresh-clone e2e lane\n")
    assert not comment_problems("m.py", "# a run of 3 faults; sha256 deadbeef; 1200000 ms\nx = 'run 6'  # a string\n")
