"""Install llm-chaos's engine plugin (chaos_engine_plugin) into a vLLM venv or image, without pip.

Run with that environment's Python: `VENV/bin/python scripts/install-engine-plugin.py`. It copies the
package into site-packages with a dist-info whose entry_points.txt registers it in vLLM's
`vllm.general_plugins` group (the plugin is standard library only, so nothing else is needed), and
replaces an older copy. Idempotent; prints what it did. docs/engine-plugin.md has the other ways.
"""
from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

NAME, VERSION = "llm_chaos_engine_plugin", "0.1.0"
ENTRY = "[vllm.general_plugins]\nllm_chaos_engine_faults = chaos_engine_plugin:register\n"


def main() -> int:
    src = Path(__file__).resolve().parent.parent / "chaos_engine_plugin"
    site = Path(sys.argv[1] if len(sys.argv) > 1 else sysconfig.get_paths()["purelib"])
    dest, info = site / "chaos_engine_plugin", site / f"{NAME}-{VERSION}.dist-info"
    files = sorted(p for p in src.glob("*.py"))
    if dest.is_dir() and all((dest / p.name).is_file() and (dest / p.name).read_bytes() == p.read_bytes() for p in files) \
            and (info / "entry_points.txt").is_file():
        print(f"install-engine-plugin: up to date in {site}")
        return 0
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for p in files:
        shutil.copy2(p, dest / p.name)
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
                                   "Summary: llm-chaos engine faults for vLLM (inert unless LLM_CHAOS_ENGINE_FAULTS is set)\n")
    (info / "entry_points.txt").write_text(ENTRY)
    (info / "INSTALLER").write_text("llm-chaos\n")
    record = [f"chaos_engine_plugin/{p.name},," for p in files] + [f"{info.name}/{n},," for n in
                                                                    ("METADATA", "entry_points.txt", "INSTALLER", "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    print(f"install-engine-plugin: installed into {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
