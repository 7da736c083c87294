# SPDX-License-Identifier: BSD-2-Clause
"""A pipelined read-modify-write of a block-RAM table with hazard forwarding (docs/protocol.md
section 8: per-QP, per-slot, per-PSN and per-entry state lives in block RAM, read-modify-written
through a pipeline with hazard forwarding)."""

from amaranth.hdl import Module, Mux, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from models.memory import ADD, CLEAR, OP_CODE_BITS, SET, WRITE

from .memory import BlockRam

__all__ = ["ReadModifyWrite", "alu_layout", "alu_prepare", "alu_modify"]


def alu_layout(width):
    """The operation of the built-in operations: ``code`` (:data:`models.memory.OPS`) and
    ``arg`` (a word)."""
    return data.StructLayout({"code": OP_CODE_BITS, "arg": width})


def alu_prepare(m, op):
    """The built-in operations (:func:`models.memory.alu`) decoded ahead of the word: ``keep``
    and ``inc`` such that ``new = (old & keep) + inc``.

    ``read``: keep all, add nothing; ``write``: keep nothing, add ``arg``; ``add``: keep all,
    add ``arg``; ``set``: keep ``~arg``, add ``arg`` (the bits of ``arg`` are clear, so the sum
    carries nowhere: ``old | arg``); ``clear``: keep ``~arg``, add nothing."""
    width = len(op.arg)
    prep = Signal(data.StructLayout({"keep": width, "inc": width}), name="alu_prep")
    m.d.comb += [prep.keep.eq((1 << width) - 1), prep.inc.eq(0)]
    with m.Switch(op.code):
        with m.Case(WRITE):
            m.d.comb += [prep.keep.eq(0), prep.inc.eq(op.arg)]
        with m.Case(ADD):
            m.d.comb += prep.inc.eq(op.arg)
        with m.Case(SET):
            m.d.comb += [prep.keep.eq(~op.arg), prep.inc.eq(op.arg)]
        with m.Case(CLEAR):
            m.d.comb += prep.keep.eq(~op.arg)
    return prep


def alu_enter(m, word, prep):
    """The bit logic of the built-in operations, ``word & keep``: with the forwarding
    multiplexer in front of the capture register, one LUT4 per bit."""
    return word & prep.keep


def alu_modify(m, entered, prep):
    """The rest of the built-in operations, ``entered + inc``: the carry chain alone."""
    return (entered + prep.inc)[:len(entered)]


class ReadModifyWrite(wiring.Component):
    """A table of ``depth`` words of ``width`` bits in a :class:`rtl.common.memory.BlockRam`,
    changed by a stream of operations, one per cycle: read the word, modify it, write it back,
    and emit the old and new words.

    Parameters
    ----------
    width : int, at least 1
    depth : int, at least 2
    modify : callable ``modify(m, word, op) -> new``, optional
        Called once at elaboration: ``m`` is the Module to add logic to (``m.d.comb`` only),
        ``word`` the word (``width`` bits, straight from a register) as every earlier operation
        left it (after ``enter``), ``op`` the operation (a view of ``op_shape``, from a
        register) or what ``prepare`` made of it; it returns the new word (at most ``width``
        bits). ``modify`` is in the loop that sets the clock (an operation on the word the
        previous cycle's operation made), so keep it short. Default: the built-in operations
        (:func:`alu_prepare`, :func:`alu_enter`, :func:`alu_modify`: read, write, add, set
        bits, clear bits; counters, bitmap words, timer-wheel buckets).
    prepare : callable ``prepare(m, op) -> value``, optional
        What ``enter`` and ``modify`` need that depends on the operation alone (decoding,
        masks): computed in the stage before the word is selected and registered (once more
        for ``modify``); they then receive it, a register, in place of ``op``. None: they
        receive ``op``.
    enter : callable ``enter(m, word, op) -> word``, optional
        A first, cheap part of the modification (bit logic on each bit alone), applied to the
        word on its way into the capture register, where it shares a LUT with the forwarding
        multiplexer; ``modify`` then receives its result. It is in the loop too. None: the
        word enters unchanged. ``res.old`` is the word before ``enter``.
    op_shape : shape-like, optional
        The operation's shape; required with ``modify``, default :func:`alu_layout`.
        Anything the caller needs back with the result (a tag, an event) may ride in it.
    output_register : bool (default True)
        The memory's output register (read latency 2; on ECP5 the DP16KD's own register) or
        none (latency 1).
    init : sequence of int, optional
        The table's contents after configuration (reset does not clear the table).
    target : None, ``"generic"`` or ``"ecp5"``
        Passed to the :class:`BlockRam`: by default from the platform.

    Ports
    -----
    req : In(stream.Signature(StructLayout({"addr": A, "op": op_shape})))
        One operation on word ``addr`` (``A`` = address bits). ``req.ready`` is a register.
    res : Out(stream.Signature(StructLayout({"addr", "op", "old", "new"})))
        The operation's address and operation, the word before (``old``) and after (``new``),
        in request order; every output is a register (a FIFO's output stage).

    Latency and throughput
    ----------------------
    One operation per cycle while ``res`` is taken, on any mix of addresses: the pipeline
    never stalls; an operation is accepted only when the result FIFO has room for it and for
    everything in flight (``self.fifo_depth`` = read latency + 6 entries, so an always-ready
    ``res`` never sees ``ready`` fall). An operation accepted in cycle ``c`` has its result on
    ``res`` from cycle ``c + self.latency``: ``c + 7`` with the output register, ``c + 6``
    without.

    Pipeline and hazards
    --------------------
    ``L`` is the read latency. Cycle ``c`` (accept): the read address goes to the memory.
    ``c + L``: the memory's word is registered in the fabric as it is (the route out of the
    block RAM is long; ``prepare`` runs here too). ``c + L + 1`` (*select*): the word, or a
    forwarded one, goes through ``enter`` into the capture register. ``c + L + 2`` (*modify*):
    ``new = modify(captured, op)``. ``c + L + 3`` (``W1``): ``new`` is written back and pushed
    into the result FIFO.

    An operation ``k`` accepted ``d`` cycles after an operation ``j`` on the same address reads
    the memory before ``j``'s write when ``d <= L + 2`` (the memory is write-first, so
    ``d = L + 3`` reads ``j``'s word from it). The select stage takes each such ``j``'s word
    from where it is then: ``d = 1`` is the word the modify stage computes in that very cycle,
    ``d = 2`` the word in ``W1``, ``d = 3`` in ``W2`` and ``d = 4`` (``L = 2``) in ``W3``
    (``W2``, ``W3``: ``W1``'s word kept one and two more cycles); the nearest wins, the memory's
    word otherwise. Each select is an address comparison made one cycle earlier, against the
    stage its source is in then, and registered. So the clock-setting loop is the capture
    register, ``modify``, one LUT level (multiplexer and ``enter``) and the capture register
    again; with the built-in operations, the carry chain and one LUT.
    """

    def __init__(self, width, depth, *, modify=None, prepare=None, enter=None, op_shape=None,
                 output_register=True, init=(), target=None):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"ReadModifyWrite: width must be an integer of at least 1, not "
                             f"{width!r}")
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"ReadModifyWrite: depth must be an integer of at least 2, not "
                             f"{depth!r}")
        for name, fn in (("modify", modify), ("prepare", prepare), ("enter", enter)):
            if fn is not None and not callable(fn):
                raise ValueError(f"ReadModifyWrite: {name} must be callable, not {fn!r}")
        if modify is None and (prepare is not None or enter is not None):
            raise ValueError("ReadModifyWrite: prepare and enter need their modify function")
        if modify is not None and op_shape is None:
            raise ValueError("ReadModifyWrite: a modify function needs its op_shape")
        if modify is None:
            modify, prepare, enter = alu_modify, alu_prepare, alu_enter
        if op_shape is None:
            op_shape = alu_layout(width)
        try:
            Shape.cast(op_shape)
        except TypeError as exc:
            raise ValueError(f"ReadModifyWrite: op_shape must be shape-like, not "
                             f"{op_shape!r}") from exc
        # The memory checks output_register, init and target.
        self.mem = BlockRam(width, depth, init=init, output_register=output_register,
                            target=target)
        self.width, self.depth, self.op_shape = width, depth, op_shape
        self.modify, self.prepare, self.enter = modify, prepare, enter
        self.read_latency = self.mem.latency
        self.latency = self.read_latency + 5
        self.fifo_depth = self.read_latency + 6
        aw = self.mem.addr_width
        self.req_layout = data.StructLayout({"addr": aw, "op": op_shape})
        self.res_layout = data.StructLayout({"addr": aw, "op": op_shape, "old": width,
                                             "new": width})
        super().__init__({"req": In(stream.Signature(self.req_layout)),
                          "res": Out(stream.Signature(self.res_layout))})

    def elaborate(self, platform):
        m = Module()
        L = self.read_latency
        m.submodules.mem = mem = self.mem
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=Shape.cast(self.res_layout).width,
                                                    depth=self.fifo_depth)

        # Credits: operations accepted and not yet taken from res; ready is a register.
        outstanding = Signal(range(self.fifo_depth + 1))
        ready = Signal(init=1)
        accept = self.req.valid & ready
        pop = self.res.valid & self.res.ready
        after = Signal.like(outstanding)
        m.d.comb += [self.req.ready.eq(ready),
                     after.eq(outstanding + accept - pop)]
        m.d.sync += [outstanding.eq(after), ready.eq(after < self.fifo_depth)]

        def stage(name, with_words=False):
            fields = {"valid": 1, "addr": self.mem.addr_width, "op": self.op_shape}
            if with_words:
                fields.update(old=self.width, new=self.width)
            return Signal(data.StructLayout(fields), name=name)

        # s[0] is the accepted request itself: its address goes to the memory now. s[1] ..
        # s[L] follow the read; s[L] sees the memory's word, s[L + 1] is the select stage,
        # s[L + 2] the modify stage.
        s0 = stage("s0")
        m.d.comb += [s0.valid.eq(accept), s0.addr.eq(self.req.payload.addr),
                     s0.op.eq(self.req.payload.op),
                     mem.r_addr.eq(s0.addr), mem.r_en.eq(1)]
        s = [s0]
        for i in range(1, L + 3):
            s.append(stage(f"s{i}"))
            m.d.sync += s[i].eq(s[i - 1])
        read, sel, mod = s[L], s[L + 1], s[L + 2]
        w = [stage(f"w{i}", with_words=True) for i in range(1, 4)]   # W1, W2, W3

        # The memory's word, registered before anything else touches it.
        raw = Signal(self.width, name="raw")
        m.d.sync += raw.eq(mem.r_data)

        # What enter and modify are given about the operation: prepare's result, computed in
        # the read stage and registered into the select stage, then again into modify.
        if self.prepare is not None:
            prepared = self.prepare(m, read.op)
            shape = prepared.shape() if isinstance(prepared, data.View) \
                else Value.cast(prepared).shape()
            given_sel, given_mod = Signal(shape, name="prep_sel"), Signal(shape, name="prep_mod")
            m.d.sync += [given_sel.eq(prepared), given_mod.eq(given_sel)]
        else:
            given_sel, given_mod = sel.op, mod.op

        # Forwarding selects for the select stage, compared one cycle ahead against the stage
        # each source is in then: d = 1 is now in the select stage (the modify stage then),
        # d = 2 in modify (W1 then), d = 3 in W1 (W2 then), d = 4 in W2 (W3 then).
        sources = [sel, mod, w[0], w[1]][:L + 2]
        fwd = [Signal(name=f"fwd{d}") for d in range(1, L + 3)]
        for f, src in zip(fwd, sources):
            m.d.sync += f.eq(src.valid & (src.addr == read.addr))

        new = Signal(self.width, name="new")
        word = Signal(self.width, name="word")
        m.d.comb += word.eq(raw)
        for f, value in reversed(list(zip(fwd, [new, w[0].new, w[1].new, w[2].new]))):
            with m.If(f):
                m.d.comb += word.eq(value)
        entered = self.enter(m, word, given_sel) if self.enter is not None else word
        captured = Signal(self.width, name="captured")
        m.d.sync += captured.eq(entered)
        # The word before the operation, for the result: the forwarded or read word, except
        # for d = 1, taken in the modify stage from W1 (then holding that word), which keeps
        # the loop's sum off this register.
        older = Signal(self.width, name="older")
        took_new = Signal(name="took_new")
        m.d.sync += [older.eq(raw), took_new.eq(fwd[0])]
        for f, value in reversed(list(zip(fwd[1:], [w[0].new, w[1].new, w[2].new]))):
            with m.If(f):
                m.d.sync += older.eq(value)
        old = Signal(self.width, name="old")
        m.d.comb += old.eq(Mux(took_new, w[0].new, older))

        m.d.comb += new.eq(self.modify(m, captured, given_mod))
        m.d.sync += [w[0].valid.eq(mod.valid), w[0].addr.eq(mod.addr), w[0].op.eq(mod.op)]
        with m.If(mod.valid):
            m.d.sync += [w[0].old.eq(old), w[0].new.eq(new)]
        for i in (1, 2):
            m.d.sync += [w[i].valid.eq(w[i - 1].valid), w[i].addr.eq(w[i - 1].addr),
                         w[i].new.eq(w[i - 1].new)]

        # Write back and emit.
        res = Signal(self.res_layout)
        m.d.comb += [mem.w_en.eq(w[0].valid), mem.w_addr.eq(w[0].addr),
                     mem.w_data.eq(w[0].new),
                     res.addr.eq(w[0].addr), res.op.eq(w[0].op), res.old.eq(w[0].old),
                     res.new.eq(w[0].new),
                     fifo.w_en.eq(w[0].valid), fifo.w_data.eq(res),
                     self.res.valid.eq(fifo.r_rdy), self.res.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.res.ready)]
        return m
