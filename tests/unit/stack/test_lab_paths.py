"""The lab's hosts see the harness's checkout, .tools and venv at their own paths: under a host's private
/tmp or /dev/shm they are shown read-through; under its /run or an engine's data root `chaos lab up` refuses
at once, in one line naming the path and why, before any host is made (the unit lane starts nothing)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from chaos.errors import StackError
from chaos.stack import lab
from chaos.stack import lab_hostfs as hostfs


@pytest.fixture
def masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two masked roots of this test's own: `tmp` (shareable, as the hosts' /tmp) and `run` (not)."""
    tmp, run = tmp_path / "tmp", tmp_path / "run"
    tmp.mkdir()
    run.mkdir()
    monkeypatch.setattr(hostfs, "MASKED", (str(tmp), str(run)))
    monkeypatch.setattr(hostfs, "SHAREABLE", (str(tmp),))
    return tmp, run


def _checkout(root: Path, tools: Path) -> Path:
    clone = root / "clone"
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").write_text("")
    (tools / "bin").mkdir(parents=True)
    (tools / "bin" / "toxiproxy-server").write_text("")
    (clone / ".tools").symlink_to(tools)
    return clone


def test_a_checkout_under_the_hosts_tmp_is_shown_to_them_as_one_directory(masks: tuple[Path, Path],
                                                                           tmp_path: Path) -> None:
    tmp, _ = masks
    clone = _checkout(tmp, tmp_path / "elsewhere" / ".tools")
    paths = [str(clone), str(clone / ".tools"), str(clone / ".tools" / "bin" / "toxiproxy-server"),
             str(clone / ".venv" / "bin" / "python"), str(clone / ".venv"), str(tmp), str(tmp / "gone")]
    assert hostfs.shares(paths) == ((str(clone),), [])
    # its .tools in the hosts' /tmp too, through a link from a checkout they see anyway: that directory is shown
    inner = _checkout(tmp_path / "work", tmp / "tools")
    assert hostfs.shares([str(inner / ".tools" / "bin" / "toxiproxy-server")]) == ((str(tmp / "tools" / "bin"),), [])


def test_a_path_under_a_mask_that_cannot_be_shared_is_refused_with_why(masks: tuple[Path, Path]) -> None:
    tmp, run = masks
    clone = _checkout(run, tmp / "tools")
    dirs, refused = hostfs.shares([str(clone), str(clone / ".tools" / "bin" / "toxiproxy-server")])
    assert refused[0] == (str(clone), f"each lab host has its own {run} (chaos/stack/lab_hostfs.py)")
    (tmp / "toxiproxy-server").write_text("")
    assert hostfs.shares([str(tmp / "toxiproxy-server")])[1] == [
        (str(tmp / "toxiproxy-server"), f"each lab host has its own {tmp}; a directory below it can be shown")]
    odd = tmp / "a:b"
    odd.mkdir()
    assert hostfs.shares([str(odd)])[1] == [(str(odd), "a lab host can be shown no path with ':', ',' or '\\' "
                                                       "in it (overlay options)")]


def test_lab_up_refuses_at_once_naming_the_path_before_any_host_is_made(masks: tuple[Path, Path],
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _, run = masks
    clone = _checkout(run, tmp_path / "tools")

    def made(*a: object, **k: object) -> None:
        raise AssertionError("a host was touched")

    monkeypatch.setattr(lab, "missing", lambda: None)
    monkeypatch.setattr(lab, "harness_paths", lambda: [os.getcwd(), str(clone / ".tools" / "bin" / "toxiproxy-server")])
    for name in ("reap_hosts", "_run"):
        monkeypatch.setattr(lab, name, made)
    for name in ("make", "remove_all", "run"):
        monkeypatch.setattr(hostfs, name, made)
    started = time.monotonic()
    with pytest.raises(StackError) as e:
        lab.Lab(tmp_path / "state").up()
    assert time.monotonic() - started < 5
    binary = clone / ".tools" / "bin" / "toxiproxy-server"
    assert str(e.value) == (f"lab: the hosts cannot see {binary}: each lab host has its own {run} "
                            "(chaos/stack/lab_hostfs.py); put the checkout, its .tools and the venv elsewhere")


def test_the_hosts_are_shown_what_the_harness_runs_from() -> None:
    repo = Path(lab.__file__).resolve().parents[2]
    paths = lab.harness_paths()
    assert {os.getcwd(), str(repo), str(repo / ".tools"), sys.executable} <= set(paths)
