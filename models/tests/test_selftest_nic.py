# SPDX-License-Identifier: BSD-2-Clause
"""models.selftest_nic: the pattern, the write check of the pattern memory and the work requests
of the generator."""

import pytest
from hypothesis import given, settings, strategies as st

from models.selftest import xorshift64
from models.selftest_nic import (PatternMemoryModel, PatternWindow, WrGenConfig, fold_length,
                                 pattern_bytes, pattern_word, rkey, work_requests, wr_fields,
                                 wr_state)

CONFIGS = st.builds(
    WrGenConfig,
    n_qps=st.sampled_from((1, 2, 4, 32)),
    max_length=st.integers(1, 4096),
    window=st.just(1 << 12) | st.sampled_from((1 << 13, 1 << 20)),
    seed=st.integers(1, (1 << 64) - 1))


def test_pattern_words_are_distinct_and_shifts_show():
    words = [pattern_word(w) for w in range(1 << 12)]
    assert len(set(words)) == len(words)
    data = pattern_bytes(0x1000, 4096)
    for shift in (1, 3, 8, 64, 4096):
        moved = pattern_bytes(0x1000 + shift, 4096)
        assert sum(a != b for a, b in zip(data, moved)) > 0.8 * len(data)


@given(st.integers(0, (1 << 48)), st.integers(0, 300), st.integers(0, 300))
def test_pattern_bytes_are_one_function_of_the_address(addr, length, cut):
    cut = min(cut, length)
    whole = pattern_bytes(addr, length)
    assert len(whole) == length
    assert pattern_bytes(addr, cut) + pattern_bytes(addr + cut, length - cut) == whole


@given(CONFIGS, st.integers(0, 2000))
@settings(max_examples=60)
def test_work_requests_stay_in_their_windows(cfg, i):
    wr = wr_fields(cfg, wr_state(cfg, i))
    assert 0 <= wr["length"] <= cfg.max_length
    assert wr["local_addr"] - cfg.local_base + wr["length"] <= cfg.span
    assert wr["remote_va"] - cfg.remote_base == wr["local_addr"] - cfg.local_base
    assert wr["rkey"] == rkey(wr["qpn"]) and wr["qpn"] < cfg.n_qps
    window = cfg.pattern_window
    for offset in {0, wr["length"] - 1} - {-1}:
        assert window.inside(wr["remote_va"] + offset)
        assert window.source(wr["remote_va"] + offset) == wr["local_addr"] + offset


def test_work_requests_follow_the_state_sequence():
    cfg = WrGenConfig(n_qps=4, max_length=1000, window=1 << 12)
    wrs = work_requests(cfg, 300)
    assert [{k: v for k, v in w.items() if k != "req_id"} for w in wrs] == \
        [wr_fields(cfg, wr_state(cfg, i)) for i in range(300)]
    assert wr_state(cfg, 0) == xorshift64(cfg.seed)
    for q in range(4):
        assert [w["req_id"] for w in wrs if w["qpn"] == q] == \
            list(range(sum(w["qpn"] == q for w in wrs)))
    lengths = [w["length"] for w in wrs]
    assert 0 in lengths and 1000 in lengths and len(set(lengths)) > 100
    assert {w["qpn"] for w in wrs} == {0, 1, 2, 3}
    assert 0.1 < sum(w["has_imm"] for w in wrs) / len(wrs) < 0.4


@given(st.integers(1, 5000), st.integers(0, (1 << 13) - 1))
def test_fold_length_covers_the_range(max_length, raw):
    raw &= (1 << max_length.bit_length()) - 1
    assert 0 <= fold_length(raw, max_length) <= max_length


@pytest.mark.parametrize("width", [64, 128, 512])
def test_pattern_memory_reads_and_checks_what_a_receiver_places(width):
    window = PatternWindow(source_base=0x10_0000, check_base=0x40_0000, span=1 << 16)
    mem = PatternMemoryModel(window, width)
    lanes = width // 8
    # A read burst from an unaligned address: every beat is the pattern of its bus word.
    beats = mem.read(0x10_0003, 4, lanes.bit_length() - 1)
    got = b"".join(b.to_bytes(lanes, "little") for b in beats)
    assert got == pattern_bytes(0x10_0000, 4 * lanes)
    # The same bytes written at the receiver's window offset: all good.
    strobes = [(1 << lanes) - 1 & ~0b111] + [(1 << lanes) - 1] * 3
    mem.write(0x40_0003, lanes.bit_length() - 1, beats, strobes)
    good = 4 * lanes - 3
    assert mem.counts["good_bytes"] == good and mem.counts["bad_bytes"] == 0
    # One flipped bit: one bad byte; a write outside the window: counted, not compared.
    mem.write(0x40_0000, lanes.bit_length() - 1, [beats[0] ^ 1 << 8 * 5], [1 << 5])
    mem.write(0x50_0000, lanes.bit_length() - 1, [0], [1])
    assert mem.counts["bad_bytes"] == 1 and mem.counts["outside_beats"] == 1
    assert mem.counts["write_beats"] == 6 and mem.counts["write_bursts"] == 3
    mem.write(0x40_0000, lanes.bit_length() - 1, [beats[0]] * 2, [0, 0], lasts=[1, 1])
    assert mem.counts["last_errors"] == 1


def test_configurations_are_checked():
    with pytest.raises(ValueError):
        PatternWindow(source_base=0x100, check_base=0x1_0000, span=1 << 12)
    with pytest.raises(ValueError):
        PatternWindow(span=48)
    with pytest.raises(ValueError):
        WrGenConfig(n_qps=3)
    with pytest.raises(ValueError):
        WrGenConfig(window=1 << 12, max_length=5000)
    with pytest.raises(ValueError):
        WrGenConfig(local_base=0x2_0000_0000, remote_base=0x2_0000_0000)
    with pytest.raises(ValueError):
        PatternMemoryModel(PatternWindow(), 32)
