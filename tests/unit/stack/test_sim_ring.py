"""The simulator's sample ring: the last `size` samples, in memory taken once at its start."""
from chaos.stack.sim.ring import Ring


def test_it_keeps_the_last_samples_and_counts_them():
    r = Ring(3)
    assert len(r) == 0 and list(r) == []
    for x in (1.0, 2.0):
        r.append(x)
    assert len(r) == 2 and sorted(r) == [1.0, 2.0]
    for x in (3.0, 4.0, 5.0):
        r.append(x)
    assert len(r) == 3 and sorted(r) == [3.0, 4.0, 5.0]


def test_its_memory_is_taken_at_the_start():
    r = Ring(1000)
    before = r._xs.buffer_info()
    for i in range(5000):
        r.append(float(i))
    assert r._xs.buffer_info() == before  # the same buffer, the same length: nothing grew
