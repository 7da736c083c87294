# SPDX-License-Identifier: BSD-2-Clause
"""models.placement: bursts legal for AXI4 (INCR, never across 4 KB, at most 256 beats, full-width
beats from the aligned address), strobes exactly on [va, va + length), memory equal to the payload,
bad packets bounded, discards and empty commands write nothing, counters."""

import pytest
from hypothesis import given, settings, strategies as st

from models.placement import (AXI_BOUNDARY, COUNTERS, DATA_WIDTHS, MAX_BURST_BEATS, Beat, Burst,
                              PlacementModel, burst_boundary, plan_bursts)
from models.records import PLACE_COMMAND

PMTU = 4096


def replay(placement, lanes, modulus):
    """The bytes the bursts and beats of a Placement write (address -> byte), from AXI rules."""
    written = {}
    beats = iter(placement.beats)
    for burst in placement.bursts:
        for k in range(burst.beats):
            beat = next(beats)
            assert beat.last == (k == burst.beats - 1)
            for lane in range(lanes):
                if beat.strobe >> lane & 1:
                    written[(burst.addr + k * lanes + lane) % modulus] = beat.data[lane]
    assert next(beats, None) is None, "more beats than the bursts hold"
    return written


def check_bursts(bursts, lanes, addr_width):
    for burst in bursts:
        assert burst.addr % lanes == 0
        assert 1 <= burst.beats <= MAX_BURST_BEATS
        assert burst.addr // AXI_BOUNDARY == (burst.addr + burst.beats * lanes - 1) // AXI_BOUNDARY
        assert burst.addr < 1 << addr_width


@settings(max_examples=300, deadline=None)
@given(width=st.sampled_from(DATA_WIDTHS), va=st.integers(0, (1 << 64) - 1),
       length=st.integers(1, PMTU), seed=st.binary(min_size=1, max_size=16),
       addr_width=st.sampled_from((64, 48, 32, 20)))
def test_good_packet_is_written_exactly(width, va, length, seed, addr_width):
    lanes = width // 8
    modulus = 1 << addr_width
    payload = (seed * (length // len(seed) + 1))[:length]
    model = PlacementModel(width, addr_width)
    out = model.push({"va": va, "length": length, "place": 1}, payload)
    check_bursts(out.bursts, lanes, addr_width)
    align = va % lanes
    assert sum(b.beats for b in out.bursts) == (align + length + lanes - 1) // lanes
    assert out.bursts[0].addr == (va - align) % modulus
    for first, second in zip(out.bursts, out.bursts[1:]):
        assert second.addr == (first.addr + first.beats * lanes) % modulus
        assert second.addr % burst_boundary(width) == 0
    want = {(va + k) % modulus: payload[k] for k in range(length)}
    assert replay(out, lanes, modulus) == want
    assert model.memory == want
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "commands": 1, "placed": 1,
                              "placed_bytes": length, "bursts": len(out.bursts),
                              "beats": len(out.beats), "resp_okay": len(out.bursts)}


@settings(max_examples=200, deadline=None)
@given(width=st.sampled_from(DATA_WIDTHS), va=st.integers(0, 1 << 20), length=st.integers(1, PMTU),
       delivered=st.integers(0, PMTU + 200))
def test_bad_packet_writes_only_its_bytes_inside_the_range(width, va, length, delivered):
    lanes = width // 8
    payload = bytes((k * 7 + 1) & 0xFF for k in range(delivered))
    model = PlacementModel(width)
    out = model.push({"va": va, "length": length, "place": 1}, payload)
    good = PlacementModel(width).push({"va": va, "length": length, "place": 1}, bytes(length))
    assert out.bursts == good.bursts, "the bursts follow the command, not the packet"
    kept = min(length, delivered)
    assert replay(out, lanes, 1 << 64) == {va + k: payload[k] for k in range(kept)}
    assert model.counters["short_payload"] == int(delivered < length)
    assert model.counters["long_payload"] == int(delivered > length)


def test_discarded_and_empty_commands_write_nothing():
    model = PlacementModel(512)
    assert model.push({"va": 100, "length": 300, "place": 0}, bytes(300)).bursts == ()
    assert model.push({"va": 100, "length": 0, "place": 1}).beats == ()
    assert model.push({"va": 100, "length": 0, "place": 0}, None).bursts == ()
    assert model.memory == {}
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "commands": 3, "discarded": 1,
                              "empty": 2}


@pytest.mark.parametrize("width, va, length, bursts", [
    (64, 0, 4096, [Burst(0, 256), Burst(2048, 256)]),             # 256 beats at most
    (512, 0, 4096, [Burst(0, 64)]),
    (512, 4095, 2, [Burst(4032, 1), Burst(4096, 1)]),              # one byte each side of 4 KB
    (128, 4090, 4096, [Burst(4080, 1), Burst(4096, 256)]),
    (256, 65, 1, [Burst(64, 1)]),
    (64, (1 << 64) - 3, 6, [Burst((1 << 64) - 8, 1), Burst(0, 1)]),  # the address space wraps
])
def test_burst_plans(width, va, length, bursts):
    assert plan_bursts(va, length, width) == bursts


def test_beats_and_strobes_of_a_misaligned_packet():
    model = PlacementModel(64)
    out = model.push({"va": 0x1005, "length": 12, "place": 1}, bytes(range(1, 13)))
    assert out.bursts == (Burst(0x1000, 3),)
    assert out.beats == (Beat(bytes([0, 0, 0, 0, 0, 1, 2, 3]), 0xE0, False),
                         Beat(bytes(range(4, 12)), 0xFF, False),
                         Beat(bytes([12, 0, 0, 0, 0, 0, 0, 0]), 0x01, True))


def test_boundary_and_record():
    assert [burst_boundary(w) for w in DATA_WIDTHS] == [2048, 4096, 4096, 4096]
    assert PLACE_COMMAND.names == ["va", "length", "place"]


@pytest.mark.parametrize("kwargs", [dict(data_width=32), dict(data_width=1024),
                                    dict(addr_width=8), dict(addr_width=65)])
def test_rejects_parameters(kwargs):
    with pytest.raises(ValueError, match="PlacementModel"):
        PlacementModel(**kwargs)
