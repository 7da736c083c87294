# SPDX-License-Identifier: BSD-2-Clause
"""Golden models of the block-RAM parts of ``rtl/common/`` (docs/protocol.md section 8: state in
block RAM, read-modify-written through a pipeline with hazard forwarding).

- :class:`BlockRamModel`: cycle by cycle, the simple-dual-port memory
  :class:`rtl.common.memory.BlockRam` (one write port, one read port, read latency 1 or 2,
  write-first on a same-address read and write, ``r_en`` advancing the read pipeline).
- :class:`RmwModel`: operation by operation, :class:`rtl.common.rmw.ReadModifyWrite`: each
  operation reads the word, applies the modify function and writes the result back, in order, so
  every operation sees the results of all the operations before it.
- The built-in operation set (:data:`READ`, :data:`WRITE`, :data:`ADD`, :data:`SET`,
  :data:`CLEAR`) and :func:`alu`, its meaning; the RTL takes its codes from here.
"""

__all__ = ["READ", "WRITE", "ADD", "SET", "CLEAR", "OPS", "OP_CODE_BITS", "alu",
           "BlockRamModel", "RmwModel"]

# The built-in operations of the read-modify-write pipeline: code -> name. ``arg`` is a word.
READ, WRITE, ADD, SET, CLEAR = range(5)
OPS = {READ: "read", WRITE: "write", ADD: "add", SET: "set", CLEAR: "clear"}
OP_CODE_BITS = 3


def alu(old, code, arg, width):
    """The new word of a built-in operation ``code`` on word ``old`` with argument ``arg``.

    ``read``: the word unchanged; ``write``: ``arg``; ``add``: ``old + arg`` modulo 2**width (a
    counter; a decrement adds the two's complement); ``set``: ``old | arg`` (set the bits of a
    bitmap word); ``clear``: ``old & ~arg`` (clear them; ``clear`` with an all-ones ``arg`` is a
    read-and-clear, as a timer-wheel bucket is emptied). Any other code leaves the word unchanged.
    """
    mask = (1 << width) - 1
    if code == WRITE:
        return arg & mask
    if code == ADD:
        return (old + arg) & mask
    if code == SET:
        return (old | arg) & mask
    if code == CLEAR:
        return old & ~arg & mask
    return old


def _check_init(init, width, depth):
    init = list(init)
    if len(init) > depth:
        raise ValueError(f"init has {len(init)} words, more than depth {depth}")
    for i, word in enumerate(init):
        if not 0 <= word < (1 << width):
            raise ValueError(f"init word {i} ({word!r}) does not fit {width} bits")
    return init + [0] * (depth - len(init))


class BlockRamModel:
    """The cycle behaviour of :class:`rtl.common.memory.BlockRam`.

    Call :meth:`cycle` once per clock cycle with that cycle's inputs; it returns ``r_data`` as
    seen during that cycle (before the clock edge that ends it), then applies the edge:

    - a read (``r_en``) takes ``mem[r_addr]``, or ``w_data`` when the same cycle writes
      ``r_addr`` (write-first), into the read pipeline, which moves only on ``r_en``: with
      ``latency`` 1 the read word is ``r_data`` from the next cycle on; with latency 2 it reaches
      ``r_data`` on the next cycle with ``r_en`` after that;
    - a write (``w_en``) stores ``w_data`` at ``w_addr``.

    The read registers start at zero and are not reset.
    """

    def __init__(self, width, depth, latency, init=()):
        if latency not in (1, 2):
            raise ValueError(f"latency must be 1 or 2, not {latency!r}")
        self.width, self.depth, self.latency = width, depth, latency
        self.mem = _check_init(init, width, depth)
        self.stages = [0] * latency

    def cycle(self, w_en, w_addr, w_data, r_en, r_addr):
        out = self.stages[-1]
        if r_en:
            word = w_data if w_en and w_addr == r_addr else self.mem[r_addr]
            self.stages = [word] + self.stages[:-1]
        if w_en:
            self.mem[w_addr] = w_data & ((1 << self.width) - 1)
        return out


class RmwModel:
    """:class:`rtl.common.rmw.ReadModifyWrite` operation by operation.

    ``modify(old, op) -> new`` is the Python twin of the RTL's modify function; by default the
    built-in :func:`alu` with ``op = (code, arg)``. :meth:`apply` returns ``(old, new)`` of one
    operation, the order of the results the RTL emits.
    """

    def __init__(self, width, depth, init=(), modify=None):
        self.width, self.depth = width, depth
        self.mem = _check_init(init, width, depth)
        self.modify = modify or (lambda old, op: alu(old, op[0], op[1], width))

    def apply(self, addr, op):
        if not 0 <= addr < self.depth:
            raise ValueError(f"address {addr!r} outside 0..{self.depth - 1}")
        old = self.mem[addr]
        new = self.modify(old, op) & ((1 << self.width) - 1)
        self.mem[addr] = new
        return old, new
