"""docs/api.md is what scripts/gen_api_docs.py writes from the front door's docstrings, never stale."""
from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest

import chaos
import chaos.errors

ROOT = Path(__file__).resolve().parents[3]


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "scripts" / "gen_api_docs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_md_is_current() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert page == _gen().generate(), (
        "docs/api.md is stale: run `python scripts/gen_api_docs.py` and commit docs/api.md")


def test_every_exported_name_has_its_section_with_its_docstring() -> None:
    gen, page = _gen(), (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    sections = {s.split("`", 2)[1]: s for s in page.split("\n## ")[1:]}
    assert list(sections) == list(chaos.__all__)
    for name in chaos.__all__:
        doc = gen.own_doc(getattr(chaos, name))
        if doc and not name.isupper() and name != "__version__":
            assert doc.split("\n", 1)[0] in sections[name], name


def test_every_exported_class_and_function_has_its_own_docstring() -> None:
    gen = _gen()
    bare = [n for n in chaos.__all__
            if (inspect.isclass(obj := getattr(chaos, n)) or inspect.isfunction(obj) or inspect.ismodule(obj))
            and gen.own_doc(obj) is None]
    assert not bare, f"exported without a docstring of its own (docs/api.md would say nothing): {bare}"


def test_a_changed_docstring_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    gen = _gen()
    assert gen.main(["--check"]) == 0
    monkeypatch.setattr(chaos.errors.ConfigError, "__doc__", "Reworded, and docs/api.md not regenerated.")
    assert gen.main(["--check"]) == 1
    assert "docs/api.md is stale" in capsys.readouterr().err
