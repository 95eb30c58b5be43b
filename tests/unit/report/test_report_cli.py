"""Bad input to the report entry points: one clear line, exit 2, no traceback."""
from __future__ import annotations

from chaos.cli import main as chaos_main
from chaos.report.screenshot import main as screenshot_main


def test_missing_results_dir_is_one_line(tmp_path, capsys):
    rc = chaos_main(["report", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"chaos: error: results dir {tmp_path / 'nope'}: not found (run pytest with --alluredir {tmp_path / 'nope'})"


def test_results_dir_without_results(tmp_path, capsys):
    (tmp_path / "res").mkdir()
    assert chaos_main(["report", "--results", str(tmp_path / "res")]) == 2
    assert "no *-result.json files" in capsys.readouterr().err


def test_screenshot_usage_and_bad_input(tmp_path, capsys):
    assert screenshot_main([]) == 2
    assert capsys.readouterr().err.startswith("usage:")
    assert screenshot_main([str(tmp_path), "out.png"]) == 2
    assert "no index.html" in capsys.readouterr().err
    (tmp_path / "index.html").write_text("<html></html>")
    assert screenshot_main([str(tmp_path), "out.png", "big"]) == 2
    assert capsys.readouterr().err.strip() == "screenshot-report: error: size 'big': expected WIDTHxHEIGHT, e.g. 1400x900"
