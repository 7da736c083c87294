# SPDX-License-Identifier: BSD-2-Clause
"""Property harnesses of the shared stream parts (rtl/common), for :func:`verif.formal.check`.

Each function returns ``(module, ports, depths)``: the harness, its free inputs and the depths of
the modes that pass (``{"prove": k}`` for an inductive proof, ``{"bmc": n}`` for a bounded one,
``{"cover": n}``). A block rebuilt keeps its harness passing (docs/protocol.md section 8: the
stream rules every block boundary keeps).
"""

from amaranth.hdl import Assert, Assume, C, Cat, Cover, Fragment, Module, Signal

from rtl.common.register_slice import RegisterSlice
from rtl.common.stream_fifo import StreamFifo
from rtl.common.stream_merge import StreamMerge

from .formal import StreamPort, find_signal, past, pipe_properties

__all__ = ["register_slice_harness", "stream_fifo_harness", "stream_merge_harness"]


def _covers(m, covers):
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)


def register_slice_harness(width=4, block=RegisterSlice):
    """RegisterSlice: the stream rules on ``i`` (assumed) and ``o`` (asserted), at most two beats
    held, beat k out = beat k in; inductive (k = 2) through the invariant that the beats held are
    the output register then the skid entry, beat k in the one its distance names."""
    m = Module()
    dut = block(width)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    i = StreamPort(dut.i, "in", "i").elaborate(m)
    o = StreamPort(dut.o, "out", "o").elaborate(m)
    slots = [(dut.o.valid, dut.o.payload),
             (find_signal(frag, "skid_valid"), find_signal(frag, "skid"))]
    ports, covers = pipe_properties(m, i, o, capacity=2, slots=slots)
    # Registered ready (section 8): i.ready is low exactly while the skid entry is full.
    m.d.comb += Assert(dut.i.ready == ~slots[1][0], "i.ready is the skid entry free")
    covers["in_out_same_cycle_full_rate"] = i.fire & o.fire & past(m, i.fire & o.fire, "both1")
    _covers(m, covers)
    return m, i.free_ports() + o.free_ports() + ports, {"prove": 2, "cover": 12}


def stream_fifo_harness(depth=3, width=2, bmc=24, cover=16):
    """StreamFifo: the stream rules, the beats held never above ``depth`` and equal to ``level``,
    beat k out = beat k in. Bounded (the storage is a memory the harness cannot name)."""
    m = Module()
    m.submodules.dut = dut = StreamFifo(width, depth)
    i = StreamPort(dut.i, "in", "i", count_width=6).elaborate(m)
    o = StreamPort(dut.o, "out", "o", count_width=6).elaborate(m)
    ports, covers = pipe_properties(m, i, o, capacity=depth, count_width=6)
    m.d.comb += Assert(dut.level == (i.taken - o.taken)[:len(dut.level)], "level = beats held")
    m.d.comb += Assert(dut.i.ready == (dut.level < depth), "room exactly while not full")
    _covers(m, covers)
    return m, i.free_ports() + o.free_ports() + ports, {"bmc": bmc, "cover": cover}


def stream_merge_harness(n=3, seq_bits=3, block=StreamMerge):
    """StreamMerge: each input's source tags its beats with its number and a sequence count
    (assumed: the merge does not look at the payload, so any bit it lost or mixed would show);
    asserted: the stream rules on ``o``, every beat out comes from an input that sent it, each
    input's beats leave in order, none lost or duplicated (beats held per input 0 or 1, their
    sum ``o.valid``), at most one input taken per cycle, and the round-robin order of the
    docstring: the input taken is the first valid one from the input after the last taken.
    Inductive (k = 2)."""
    m = Module()
    id_bits = max(1, (n - 1).bit_length())
    width = seq_bits + id_bits
    dut = block(width, n)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    ins = [StreamPort(dut.i[j], "in", f"i{j}").elaborate(m) for j in range(n)]
    o = StreamPort(dut.o, "out", "o").elaborate(m)
    for j, port in enumerate(ins):
        tagged = Cat(port.taken[:seq_bits], C(j, id_bits))
        m.d.comb += Assume(~dut.i[j].valid | (dut.i[j].payload == tagged))
    out_seq, out_id = dut.o.payload[:seq_bits], dut.o.payload[seq_bits:]
    m.d.comb += Assert(~dut.o.valid | (out_id < n), "o carries an input's beat")
    outs, held = [], []
    for j in range(n):
        taken = Signal(8, name=f"o_from{j}")
        with m.If(o.fire & (out_id == j)):
            m.d.sync += taken.eq(taken + 1)
        outs.append(taken)
        h = Signal(8, name=f"held{j}")
        m.d.comb += h.eq(ins[j].taken - taken)
        held.append(h)
        m.d.comb += Assert(h <= 1, f"input {j}: one beat held at most")
        m.d.comb += Assert(~(dut.o.valid & (out_id == j)) | ((h == 1) & (out_seq ==
                           taken[:seq_bits])), f"input {j}: beat out in order")
    m.d.comb += Assert(sum(held) == dut.o.valid, "beats held = o.valid")
    fires = Cat(*(p.fire for p in ins))
    m.d.comb += Assert((fires & (fires - 1)) == 0, "one input taken per cycle")
    # Round robin: after input k is taken, the inputs after k (circularly) come first.
    first = Signal(range(n), name="rr_first")
    for k in range(n):
        with m.If(ins[k].fire):
            m.d.sync += first.eq((k + 1) % n)
            for start in range(n):
                order = [(start + d) % n for d in range(n)]
                ahead = order[:order.index(k)]
                if ahead:
                    m.d.comb += Assert(~(first == start) | ~Cat(*(dut.i[a].valid
                                                                  for a in ahead)).any(),
                                       f"round robin: input {k} taken past a valid input")
    # A free output with a valid input takes one (no idle bubble).
    m.d.comb += Assert(~((~dut.o.valid | dut.o.ready) & Cat(*(dut.i[j].valid
                       for j in range(n))).any()) | fires.any(), "no bubble")
    m.d.comb += Assert((find_signal(frag, "first") == first) & (first < n), "priority register")
    all_valid = Cat(*(dut.i[j].valid for j in range(n))).all()
    covers = {"all_inputs_valid_each_taken_in_turn": all_valid & ins[n - 1].fire
              & past(m, all_valid & ins[n - 2].fire, "rr_prev"),
              "output_stalled": dut.o.valid & ~dut.o.ready & all_valid,
              "seq_wraps": o.fire & (out_id == 0) & (outs[0] == (1 << seq_bits))}
    _covers(m, covers)
    ports = [p for port in ins for p in port.free_ports()] + o.free_ports()
    return m, ports, {"prove": 2, "cover": 14}
