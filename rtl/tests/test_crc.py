# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""rtl.common.crc: the bitwise CRC-32 and its matrices against zlib, and the Amaranth helpers in the
Amaranth simulator: one beat of W/8 bytes with every valid byte count 0..W/8 (invalid bytes
zeroed, the trailing zero bytes undone) against zlib.crc32."""

import random
import zlib

import pytest
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from amaranth.utils import bits_for

from rtl.common.crc import (
    CRC_INIT, crc32_bitwise, crc_update, mat_apply, mat_inverse, mat_mul, mat_pow, mat_vec,
    seed_state, undo_zeros, update_matrix, zero_matrix,
)

MASK32 = 0xFFFF_FFFF
IDENTITY = tuple(1 << i for i in range(32))
WIDTHS = (64, 128, 256, 512)


def zlib_raw(state, data):
    """The raw register after ``data`` from raw register ``state``, computed by zlib."""
    return zlib.crc32(bytes(data), state ^ MASK32) ^ MASK32


# --- pure Python --------------------------------------------------------------------------------

@pytest.mark.parametrize("length", [0, 1, 2, 3, 7, 8, 54, 100, 1500])
def test_bitwise_definition_is_zlib(length):
    rng = random.Random(length)
    data = bytes(rng.getrandbits(8) for _ in range(length))
    assert crc32_bitwise(CRC_INIT, data) ^ MASK32 == zlib.crc32(data)
    state = rng.getrandbits(32)
    assert crc32_bitwise(state, data) == zlib_raw(state, data)


@pytest.mark.parametrize("nbytes", [0, 1, 5, 8, 16, 64])
def test_update_matrix_is_the_crc(nbytes):
    rng = random.Random(nbytes)
    rows = update_matrix(nbytes)
    assert len(rows) == 32
    for _ in range(20):
        state, data = rng.getrandbits(32), bytes(rng.getrandbits(8) for _ in range(nbytes))
        assert mat_apply(rows, state | int.from_bytes(data, "little") << 32) == \
            zlib_raw(state, data)


def test_zero_matrix_powers_and_inverse():
    one = zero_matrix(1)
    assert mat_mul(one, mat_inverse(one)) == IDENTITY
    assert mat_mul(zero_matrix(-1), one) == IDENTITY
    assert zero_matrix(0) == IDENTITY
    assert mat_pow(one, 54) == zero_matrix(54)
    assert mat_mul(zero_matrix(-54), zero_matrix(54)) == IDENTITY
    rng = random.Random(1)
    for n in (1, 2, 6, 63):
        state = rng.getrandbits(32)
        assert mat_apply(zero_matrix(n), state) == zlib_raw(state, bytes(n))
        assert mat_apply(zero_matrix(-n), zlib_raw(state, bytes(n))) == state


def test_singular_matrix_refused():
    with pytest.raises(ValueError):
        mat_inverse((0,) * 32)


def test_seed_state_folds_a_prefix_and_skipped_bytes():
    seed = seed_state(b"\xff" * 8, 54)
    frame = bytes(random.Random(2).getrandbits(8) for _ in range(200))
    # Zeroing the first 54 bytes and starting from the seed is the ICRC's CRC over the prefix and
    # the bytes from 54 on.
    assert crc32_bitwise(seed, bytes(54) + frame[54:]) ^ MASK32 == \
        zlib.crc32(b"\xff" * 8 + frame[54:])


def test_argument_checks():
    m = Module()
    with pytest.raises(ValueError):
        update_matrix(-1)
    with pytest.raises(ValueError):
        crc_update(m, Signal(32), Signal(12))
    with pytest.raises(ValueError):
        undo_zeros(m, Signal(32), Signal(2), step=0)


# --- Amaranth simulator -------------------------------------------------------------------------

class BeatCrc(wiring.Component):
    """The raw state after the first ``count`` bytes of ``data`` from ``state``: the invalid
    bytes are zeroed, the beat goes through :func:`crc_update`, and the ``W/8 - count`` trailing
    zero bytes are undone with :func:`undo_zeros` (the way a receive-side ICRC check would)."""

    def __init__(self, data_width):
        self.lanes = data_width // 8
        super().__init__({
            "state": In(32),
            "data": In(data_width),
            "count": In(bits_for(self.lanes)),
            "out": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        masked = Cat(*(Mux(self.count > lane, self.data[8 * lane:8 * lane + 8], 0)
                       for lane in range(lanes)))
        full = crc_update(m, self.state, masked)
        zeros = Signal(bits_for(lanes))
        m.d.comb += zeros.eq(lanes - self.count)
        m.d.comb += self.out.eq(undo_zeros(m, full, zeros))
        return m


class Product(wiring.Component):
    """``mat_vec`` of a fixed matrix, and ``undo_zeros`` with a base and a step."""

    def __init__(self, rows, width, base, step):
        self.rows, self.base, self.step = rows, base, step
        super().__init__({
            "vector": In(width),
            "count": In(3),
            "product": Out(32),
            "undone": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.product.eq(mat_vec(m, self.rows, self.vector, "product")),
            self.undone.eq(undo_zeros(m, self.vector[:32], self.count, base=self.base,
                                      step=self.step)),
        ]
        return m


def run_comb(dut, bench):
    sim = Simulator(dut)

    async def testbench(ctx):
        await bench(ctx)

    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("data_width", WIDTHS)
def test_beat_every_byte_count_against_zlib(data_width):
    dut = BeatCrc(data_width)
    lanes = data_width // 8
    rng = random.Random(data_width)

    async def bench(ctx):
        for count in range(lanes + 1):
            for _ in range(3):
                state = rng.getrandbits(32)
                data = bytes(rng.getrandbits(8) for _ in range(lanes))
                ctx.set(dut.state, state)
                ctx.set(dut.data, int.from_bytes(data, "little"))
                ctx.set(dut.count, count)
                got = ctx.get(dut.out)
                assert got == zlib_raw(state, data[:count]), f"W={data_width}, {count} bytes"
                # and zlib's own value of a message that starts here
                ctx.set(dut.state, CRC_INIT)
                assert ctx.get(dut.out) ^ MASK32 == zlib.crc32(data[:count])

    run_comb(dut, bench)


def test_matrix_product_and_undo_with_base_and_step():
    rng = random.Random(3)
    rows = tuple(rng.getrandbits(40) for _ in range(32))
    dut = Product(rows, 40, base=2, step=4)

    async def bench(ctx):
        for _ in range(50):
            vector, count = rng.getrandbits(40), rng.randrange(8)
            ctx.set(dut.vector, vector)
            ctx.set(dut.count, count)
            assert ctx.get(dut.product) == mat_apply(rows, vector)
            zeros = 2 + 4 * count
            assert mat_apply(zero_matrix(zeros), ctx.get(dut.undone)) == vector & MASK32

    run_comb(dut, bench)
