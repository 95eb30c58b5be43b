"""The pytest plugin, exercised through pytester in throwaway projects."""
from __future__ import annotations

from pathlib import Path

import pytest

ENV_OK = """
name: {name}
endpoints: {{api: "http://127.0.0.1:9"}}
safety: {{protected: {protected}}}
"""

TESTS = """
import pytest

def test_env(chaos_env):
    assert chaos_env.name == "{name}"

@pytest.mark.destructive
def test_hurt():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CHAOS_ENV", raising=False)
    monkeypatch.delenv("CHAOS_ALLOW_DESTRUCTIVE", raising=False)
    envs = pytester.mkdir("environments")
    (envs / "local.yaml").write_text(ENV_OK.format(name="local", protected="false"))
    (envs / "staging.yaml").write_text(ENV_OK.format(name="staging", protected="true"))
    (envs / "broken.yaml").write_text("name: broken\nendpoints: {api: [\n")
    (envs / "invalid.yaml").write_text("name: invalid\nendpoints: {api: 1}\nretry: {min_interval_s: 0.1}\n")
    return pytester


def test_default_env_is_local(project: pytest.Pytester) -> None:
    project.makepyfile(TESTS.format(name="local"))
    r = project.runpytest("-p", "no:cacheprovider")
    r.assert_outcomes(passed=2)


def test_env_option_and_env_var(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(TESTS.format(name="staging"))
    project.runpytest("--env", "staging", "--allow-destructive").assert_outcomes(passed=2)
    monkeypatch.setenv("CHAOS_ENV", "staging")
    r = project.runpytest("--allow-destructive")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["llm-chaos: env staging (protected)*"])


def test_ini_twin(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nchaos_env = staging\nchaos_allow_destructive = true\n")
    project.makepyfile(TESTS.format(name="staging"))
    project.runpytest().assert_outcomes(passed=2)


def test_env_path(project: pytest.Pytester) -> None:
    project.makepyfile(TESTS.format(name="local"))
    path = Path(project.path) / "environments" / "local.yaml"
    project.runpytest("--env", str(path)).assert_outcomes(passed=2)


def test_destructive_refused_on_protected(project: pytest.Pytester) -> None:
    project.makepyfile(TESTS.format(name="staging"))
    r = project.runpytest("--env", "staging", "-rs")
    r.assert_outcomes(passed=1, skipped=1)
    r.stdout.fnmatch_lines(["*refused: destructive test against protected environment 'staging'*--allow-destructive*"])


@pytest.mark.parametrize(
    "env, expect",
    [
        ("nope", "*--env nope: unknown environment (available: broken, invalid, local, staging)*"),
        ("broken", "*broken.yaml:*YAML syntax error*"),
        ("invalid", "*invalid.yaml:2: endpoints.api*"),
        ("missing/file.yaml", "*missing/file.yaml: environment file not found*"),
    ],
)
def test_bad_env_is_one_line_usage_error(project: pytest.Pytester, env: str, expect: str) -> None:
    project.makepyfile(TESTS.format(name="local"))
    r = project.runpytest("--env", env)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([expect])
    if env == "invalid":  # every error of the file, each on its line
        r.stderr.fnmatch_lines(["*invalid.yaml:3: retry.min_interval_s: Input should be greater than or equal to 0.5*"])
    assert "Traceback" not in r.stderr.str() + r.stdout.str()


def test_markers_are_registered_and_strict(project: pytest.Pytester) -> None:
    project.makepyfile("""
        import pytest
        @pytest.mark.gpu
        @pytest.mark.docker
        @pytest.mark.slow
        def test_a(): pass
        @pytest.mark.not_a_marker
        def test_b(): pass
    """)
    r = project.runpytest("--strict-markers")
    r.stdout.fnmatch_lines(["*'not_a_marker' not found in `markers` configuration option*"])
    assert r.ret != 0
    r = project.runpytest("--markers")
    r.stdout.fnmatch_lines(["@pytest.mark.destructive:*", "@pytest.mark.gpu:*"])
