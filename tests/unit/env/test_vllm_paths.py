"""A process target's vLLM program and model, written relative, are found from any working directory:
the working directory first (as before), then the environment file's folder, then the llm-chaos checkout
(`make setup-vllm`'s defaults). A model name (for vLLM to fetch) and a container's path stay as written."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.env import load

ENV = """name: paths
endpoints: {{api: "http://127.0.0.1:19000", model: m}}
targets:
  - name: a
    kind: process
    port: 19201
    vllm: {{serve: {serve}, model: {model}}}
  - name: b
    kind: docker
    image: some/vllm
    port: 19202
    vllm: {{model: models/tiny}}
"""


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "envs" / "bin").mkdir(parents=True)
    (tmp_path / "envs" / "bin" / "serve").write_text("#!/bin/sh\n")
    (tmp_path / "checkout" / ".tools" / "vllm" / "models" / "tiny").mkdir(parents=True)
    (tmp_path / "envs" / "models" / "tiny").mkdir(parents=True)  # a docker target's path: the image's
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setattr("chaos.env.loader.CHECKOUT", tmp_path / "checkout")
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path


def test_relative_paths_are_found_by_the_file_s_folder_then_the_checkout(layout: Path) -> None:
    f = layout / "envs" / "paths.yaml"
    f.write_text(ENV.format(serve="bin/serve", model=".tools/vllm/models/tiny"))
    env = load(str(f), environ={})
    a, b = env.target("a").vllm, env.target("b").vllm
    assert a is not None and b is not None
    assert a.serve == str(layout / "envs" / "bin" / "serve")
    assert a.model == str(layout / "checkout" / ".tools" / "vllm" / "models" / "tiny")
    assert b.model == "models/tiny"  # inside the container, whatever this host has


def test_a_model_name_and_a_missing_program_stay_as_written(layout: Path) -> None:
    f = layout / "envs" / "paths.yaml"
    f.write_text(ENV.format(serve="bin/not-installed", model="meta-llama/Llama-3.2-1B"))
    a = load(str(f), environ={}).target("a").vllm
    assert a is not None and (a.serve, a.model) == ("bin/not-installed", "meta-llama/Llama-3.2-1B")


def test_the_working_directory_comes_first(layout: Path) -> None:
    (layout / "elsewhere" / "bin").mkdir()
    (layout / "elsewhere" / "bin" / "serve").write_text("#!/bin/sh\n")
    f = layout / "envs" / "paths.yaml"
    f.write_text(ENV.format(serve="bin/serve", model="m"))
    a = load(str(f), environ={}).target("a").vllm
    assert a is not None and a.serve == str(layout / "elsewhere" / "bin" / "serve")
