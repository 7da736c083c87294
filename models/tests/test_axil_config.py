# SPDX-License-Identifier: BSD-2-Clause
"""models.axil_config: address decoding, responses, and the register map seen through the bridge."""

import pytest
from hypothesis import given, strategies as st

from models.axil_config import (DECERR, FULL_STRB, MASK32, OKAY, SLVERR, AxilConfigModel,
                                RegisterMapModel, read_cycles, read_response, word_of,
                                write_cycles, write_response)

ADDR_WIDTH = 6


def small_map():
    regs = RegisterMapModel()
    regs.reg(0, init=0x1234)
    regs.reg(1, width=5, init=3)
    regs.ro(2, 0xCAFE)
    regs.counter(3)
    return regs


def test_word_of_and_responses():
    assert word_of(0x00, 6) == 0 and word_of(0xFF, 6) == 0x3F
    assert word_of(0x100, 6) is None and word_of(1 << 31, 6) is None
    assert write_response(0x10, FULL_STRB, 6) == OKAY
    assert write_response(0x10, 0x7, 6) == SLVERR
    assert write_response(0x100, 0x7, 6) == DECERR        # DECERR before SLVERR
    assert read_response(0x13, 6) == OKAY and read_response(0x100, 6) == DECERR
    assert write_cycles() == 2 and read_cycles(1) == 4 and read_cycles(3) == 6


def test_register_map_kinds():
    model = AxilConfigModel(ADDR_WIDTH, small_map())
    assert model.read(0x0) == (OKAY, 0x1234)
    assert model.write(0x4, 0xFFFF_FFFF) == OKAY and model.read(0x4) == (OKAY, 0x1F)
    assert model.write(0x8, 1) == OKAY and model.read(0x8) == (OKAY, 0xCAFE)   # ro ignores
    model.target.count(3, 5)
    assert model.read(0xC) == (OKAY, 5)
    assert model.write(0xC, 0x77, strb=0x1) == SLVERR and model.read(0xC) == (OKAY, 5)
    assert model.write(0xC, 0x77) == OKAY and model.read(0xC) == (OKAY, 0)       # cleared
    assert model.read(0x3C) == (OKAY, 0)                                          # unmapped
    assert model.write(0x100, 1) == DECERR and model.read(0x100) == (DECERR, 0)


def test_counter_wraps_and_misuse_raises():
    regs = small_map()
    regs.count(3, MASK32)
    regs.count(3, 2)
    assert regs.read(3) == 1
    with pytest.raises(ValueError):
        regs.count(0)
    with pytest.raises(ValueError):
        regs.reg(2)
    with pytest.raises(ValueError):
        AxilConfigModel(0, regs)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, (1 << 10) - 1),
                          st.integers(0, MASK32), st.integers(0, 15)), max_size=60))
def test_only_full_in_range_writes_change_anything(ops):
    """Against a plain dict: a write lands only with strb 0xF and the address in range."""
    model = AxilConfigModel(ADDR_WIDTH, small_map())
    expected = {0: 0x1234, 1: 3, 2: 0xCAFE, 3: 0}
    for is_write, address, data, strb in ops:
        word = address >> 2
        in_range = address < 1 << (ADDR_WIDTH + 2)
        if is_write:
            resp = model.write(address, data, strb)
            assert resp == (DECERR if not in_range else OKAY if strb == 0xF else SLVERR)
            if resp == OKAY and word in (0, 1, 3):
                expected[word] = {0: data, 1: data & 0x1F, 3: 0}[word]
        else:
            got = model.read(address)
            assert got == ((OKAY, expected.get(word, 0)) if in_range else (DECERR, 0))
