"""The end-to-end lane runs on two xdist workers: no two CHAOS_PORT_OFFSETs its tests may hold at one moment
(the fixed ones, and those free_port_offset draws on the two workers) put two components on one port."""
from __future__ import annotations

from itertools import combinations

from tests._support import (
    FIXED_OFFSETS,
    OFFSET_GAP,
    OFFSET_PORTS_BELOW,
    REPO,
    env_ports,
    offset_candidates,
)

FILES = ("environments/local.yaml", "chaos/env/builtin/local.yaml", "examples/own-suite/environments/my-stack.yaml")
PORTS = env_ports(*((REPO / f).read_text(encoding="utf-8") for f in FILES))


def _clash(a: int, b: int) -> list[int]:
    """The ports two stacks of these files would both listen on, one at offset a, one at offset b."""
    return sorted({p + a for p in PORTS} & {p + b for p in PORTS})


def test_the_environment_ports_fit_the_offset_scheme() -> None:
    assert len(PORTS) > 10, PORTS  # the files were read
    assert max(PORTS) < OFFSET_PORTS_BELOW and max(PORTS) - min(PORTS) < OFFSET_GAP, (min(PORTS), max(PORTS))


def test_no_two_fixed_offsets_share_a_port() -> None:
    for (x, a), (y, b) in combinations(FIXED_OFFSETS.items(), 2):
        assert _clash(a, b) == [], (x, a, y, b, _clash(a, b))


def test_the_two_workers_slices_never_meet_nor_a_fixed_offset() -> None:
    gw0, gw1 = offset_candidates(0, 2), offset_candidates(1, 2)
    assert len(gw0) >= 20 and len(gw1) >= 20, (gw0, gw1)
    for a in gw0:
        for b in gw1:
            assert _clash(a, b) == [], (a, b)
    for name, fixed in FIXED_OFFSETS.items():
        for a in gw0 + gw1 + offset_candidates():
            assert _clash(a, fixed) == [], (name, fixed, a)


def test_the_clash_check_sees_the_one_that_happened() -> None:
    # the gray-release game day at 760 and the release suite at 780: replica-a's simulator (18201 + 780)
    # on replica-a's fault proxy (18221 + 760)
    assert 18981 in _clash(760, 780)
