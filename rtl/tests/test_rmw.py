# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""rtl.common.rmw.ReadModifyWrite in Amaranth's simulator against models.memory.RmwModel (a
Python dict of words): random operations with random valid and ready, bursts on one address
(back-to-back operations that must see each other through the forwarding), both read latencies,
the built-in operations and a user modify function; one operation per cycle and the stated
latency when nothing stalls; ``req.ready`` a register."""

import random

import pytest
from amaranth.hdl import Cat, Mux
from amaranth.lib import data
from amaranth.sim import Simulator

from models.memory import ADD, CLEAR, OPS, READ, SET, WRITE, RmwModel
from rtl.common.rmw import ReadModifyWrite


def random_ops(rng, n, width, depth, op_fn=None):
    """``n`` operations ``(addr, op)``: runs of 1..8 on one address (a burst), among a few hot
    addresses or any; ``op`` from ``op_fn(rng)`` or a built-in ``(code, arg)``."""
    hot = [rng.randrange(depth) for _ in range(3)]
    ops = []
    while len(ops) < n:
        addr = rng.choice(hot) if rng.random() < 0.6 else rng.randrange(depth)
        for _ in range(rng.choice((1, 1, 2, 3, 8))):
            if op_fn:
                ops.append((addr, op_fn(rng)))
            else:
                code = rng.choice((READ, WRITE, ADD, ADD, SET, CLEAR))
                arg = rng.choice((1, rng.getrandbits(width), (1 << width) - 1,
                                  1 << rng.randrange(width)))
                ops.append((addr, (code, arg)))
    return ops[:n]


def run_rmw(dut, ops, p_valid, p_ready, seed, pack_op=None):
    """Push ``ops`` through ``dut``; returns (results, cycles, latency of the first result,
    cycles with req.ready low)."""
    rng = random.Random(seed)
    pack_op = pack_op or (lambda op: {"code": op[0], "arg": op[1]})
    got = []
    state = {"cycles": 0, "first": None, "ready_low": 0}

    async def bench(ctx):
        pending = list(ops)
        while len(got) < len(ops):
            offer = bool(pending) and rng.random() < p_valid
            take = rng.random() < p_ready
            ctx.set(dut.req.valid, offer)
            if offer:
                addr, op = pending[0]
                ctx.set(dut.req.payload.addr, addr)
                ctx.set(dut.req.payload.op, pack_op(op))
            # req.ready is a register: it must not follow res.ready in this cycle.
            ctx.set(dut.res.ready, not take)
            ready = ctx.get(dut.req.ready)
            ctx.set(dut.res.ready, take)
            assert ctx.get(dut.req.ready) == ready, "req.ready follows res.ready"
            state["ready_low"] += bool(pending) and not ready
            if ctx.get(dut.res.valid) and take:
                r = ctx.get(dut.res.payload)
                got.append((r.addr, r.old, r.new))
                if state["first"] is None:
                    state["first"] = state["cycles"]
            await ctx.tick()
            if offer and ready:
                pending.pop(0)
            state["cycles"] += 1
            assert state["cycles"] < 30 * len(ops) + 100, "the pipeline stopped"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, state["cycles"], state["first"], state["ready_low"]


def expected(ops, width, depth, init=(), modify=None):
    model = RmwModel(width, depth, init, modify)
    return [(addr, *model.apply(addr, op)) for addr, op in ops]


@pytest.mark.parametrize("output_register", [True, False])
@pytest.mark.parametrize("p_valid,p_ready", [(1.0, 1.0), (0.7, 0.6), (1.0, 0.3), (0.4, 1.0)])
def test_random_operations_match_the_model(output_register, p_valid, p_ready):
    width, depth = 16, 64
    seed = int(p_valid * 10) * 100 + int(p_ready * 10) + output_register
    rng = random.Random(seed)
    init = [rng.getrandbits(width) for _ in range(depth)]
    ops = random_ops(rng, 600, width, depth)
    dut = ReadModifyWrite(width, depth, output_register=output_register, init=init)
    got, _, _, _ = run_rmw(dut, ops, p_valid, p_ready, seed)
    assert got == expected(ops, width, depth, init)


@pytest.mark.parametrize("output_register", [True, False])
def test_back_to_back_on_one_address_is_one_per_cycle(output_register):
    """A counter incremented every cycle: each operation needs the previous one's result from
    the forwarding path (d = 1), and every other from d = 2, and so on."""
    width, depth = 12, 32
    ops = [(5, (ADD, 1))] * 100 + [(5, (SET, 0x800)), (6, (ADD, 3)), (5, (CLEAR, 0x801)),
                                   (5, (ADD, 1)), (6, (ADD, 3)), (6, (READ, 0))]
    dut = ReadModifyWrite(width, depth, output_register=output_register)
    got, cycles, first, ready_low = run_rmw(dut, ops, 1.0, 1.0, 0)
    assert got == expected(ops, width, depth)
    assert [new for _, _, new in got[:100]] == list(range(1, 101))
    assert first == dut.latency                  # accepted in cycle 0, out in cycle latency
    assert cycles == len(ops) + dut.latency      # one per cycle, no bubble
    assert ready_low == 0


def test_a_user_modify_function_with_its_own_operation():
    """A per-QP state word: {psn: 12, credits: 4}; an operation sets the PSN if it is newer
    and takes a credit, and carries a tag back."""
    state = data.StructLayout({"psn": 12, "credits": 4})
    op_shape = data.StructLayout({"psn": 12, "take": 1, "tag": 5})

    def modify(m, old, op):
        word = state(old)
        return Cat(Mux(op.psn > word.psn, op.psn, word.psn), word.credits - op.take)

    def model(old, op):
        psn, credits = old & 0xFFF, old >> 12
        psn2 = op["psn"] if op["psn"] > psn else psn
        return psn2 | ((credits - op["take"]) & 0xF) << 12

    rng = random.Random(9)
    ops = random_ops(rng, 400, 16, 8, lambda r: {"psn": r.getrandbits(12),
                                                  "take": r.getrandbits(1),
                                                  "tag": r.getrandbits(5)})
    dut = ReadModifyWrite(16, 8, modify=modify, op_shape=op_shape)
    got, _, _, _ = run_rmw(dut, ops, 0.9, 0.8, 9, pack_op=lambda op: op)
    assert got == expected(ops, 16, 8, modify=model)


def test_the_built_in_operations_are_the_models():
    assert set(OPS) == {READ, WRITE, ADD, SET, CLEAR}


@pytest.mark.parametrize("kwargs,match", [
    ({"width": 0, "depth": 4}, "width must be an integer of at least 1, not 0"),
    ({"width": 8, "depth": 1}, "depth must be an integer of at least 2, not 1"),
    ({"width": 8, "depth": 4, "modify": 3}, "modify must be callable, not 3"),
    ({"width": 8, "depth": 4, "prepare": len}, "prepare and enter need their modify function"),
    ({"width": 8, "depth": 4, "modify": lambda m, o, p: o}, "needs its op_shape"),
    ({"width": 8, "depth": 4, "op_shape": "wide"}, "op_shape must be shape-like"),
    ({"width": 8, "depth": 4, "output_register": None}, "output_register must be True or"),
])
def test_bad_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ReadModifyWrite(**kwargs)
