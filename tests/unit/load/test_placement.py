"""Worker placement: the ssh:// form, its one-line errors, and the record stream of an ssh worker
(what chaos/load/ssh_worker.py sends, written back into the run's directory). The real run over SSH
is tests/standins/lab/test_load_hosts.py."""
from __future__ import annotations

import io
import json
import shlex

import pytest

from chaos.errors import LoadError
from chaos.load.placement import RecordStream, worker_placement
from chaos.load.ssh_worker import Pump


def test_an_ssh_worker_host_is_reached_through_a_reverse_forward_of_its_own_session(monkeypatch):
    monkeypatch.setenv("CHAOS_SSH_CONFIG", "/etc/lab/ssh_config")
    p = worker_placement("ssh://qa@loadgen-1:2222", python="/opt/llm-chaos/bin/python")
    assert p.remote and p.master_host == "127.0.0.1"
    cmd = p.ssh_command(master_port=41000, forward_port=42000)
    assert cmd[:3] == ["ssh", "-F", "/etc/lab/ssh_config"] and "BatchMode=yes" in cmd
    assert cmd[cmd.index("-p") + 1] == "2222" and cmd[cmd.index("-R") + 1] == "127.0.0.1:42000:127.0.0.1:41000"
    assert cmd[-3:-1] == ["qa@loadgen-1", "--"]
    assert shlex.split(cmd[-1]) == ["/opt/llm-chaos/bin/python", "-m", "chaos.load.ssh_worker", "--master-port", "42000"]


@pytest.mark.parametrize("bad", ["ssh://", "ssh://host:port", "ssh://host/some/path", "gpu-7"])
def test_a_bad_worker_host_is_one_line_naming_what_is_expected(bad):
    with pytest.raises(LoadError) as e:
        worker_placement(bad)
    assert f"worker host {bad!r}" in str(e.value) and "ssh://[user@]host[:port]" in str(e.value)
    assert "\n" not in str(e.value)


def test_what_an_ssh_worker_sends_lands_in_the_run_directory_as_it_wrote_it(tmp_path):
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir(), local.mkdir()
    wire = io.BytesIO()
    pump = Pump(remote, wire)
    rec = remote / "records-load-1-77.jsonl"
    rec.write_text('{"id": 1}\n{"id": 2}\n{"id": 3, "half')  # a half-written line waits
    pump()
    with open(rec, "a") as f:
        f.write(' written": true}\n')
    pump()
    (remote / "meta-load-1-77.json").write_text(json.dumps({"cpu_s": 1.5, "wall_s": 9.0}, indent=2))
    pump.metas()
    sent = wire.getvalue()
    sent += b"R ../../evil.jsonl {}\nR notes.txt {}\n"  # never written outside the run's records
    stream = RecordStream(io.BytesIO(b"S load-1\n" + sent), local)
    stream.run()
    assert stream.ready.is_set()
    lines = (local / "records-load-1-77.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [1, 2, 3] and json.loads(lines[2])["half written"] is True
    assert json.loads((local / "meta-load-1-77.json").read_text()) == {"cpu_s": 1.5, "wall_s": 9.0}
    assert sorted(p.name for p in local.iterdir()) == ["meta-load-1-77.json", "records-load-1-77.jsonl"]
    assert not (tmp_path / "evil.jsonl").exists()


def test_a_lab_hosts_master_address_is_its_routes_next_hop(monkeypatch):
    """The load layer reads the lab host's link from its namespace, not from the lab's host table."""
    import subprocess

    from chaos.load import placement

    routes = "10.231.0.0/16 via 10.231.2.1 dev chaos-load-ns\n10.231.2.0/24 dev chaos-load-ns proto kernel scope link\n"
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, routes, "")

    monkeypatch.setattr(placement.subprocess, "run", run)
    assert placement._next_hop("chaos-lab-load", "lab-load") == "10.231.2.1"
    assert seen == [["ip", "-n", "chaos-lab-load", "-4", "route", "show"]]
    routes = "10.231.2.0/24 dev chaos-load-ns proto kernel scope link\n"
    with pytest.raises(LoadError, match="worker host lab-load: namespace chaos-lab-load has no route"):
        placement._next_hop("chaos-lab-load", "lab-load")
