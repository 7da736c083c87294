# SPDX-License-Identifier: BSD-2-Clause
"""CRC-32 for wide datapaths: the Ethernet polynomial, reflected, as zlib (docs/protocol.md 1.6).

The CRC is derived here from its bitwise definition (:func:`crc32_bitwise`, one bit per step), not
from zlib, and turned into GF(2) matrices: a CRC over bytes is affine in the state and the data, so
the *raw* state (the register, before the final XOR) after a beat of ``n`` bytes is

    s' = M_n s  xor  G_n d

where ``d`` is the beat in AXI-Stream lane order (byte 0 in bits 7..0). :func:`update_matrix` gives
the rows of ``[M_n | G_n]``; :func:`crc_update` builds the XOR trees in Amaranth.

A partial last beat is handled soundly by zeroing its invalid bytes: processing a zero byte maps the
state through the invertible matrix ``Z`` (:func:`zero_matrix`), so the true state is
``Z^-k s'`` for ``k`` trailing zero bytes. :func:`undo_zeros` applies that with a log-depth chain of
conditional multiplications by ``Z^-(2^i)``. Bytes *before* the covered region of a beat are also
zeroed, and folded into the starting state with :func:`seed_state`.

zlib's value of a message is ``~raw``; the receive side (ICRC check) and the header inserter share
these helpers. Matrices are tuples of 32 row masks: row ``i`` is an int whose set bits name the
input bits XORed into output bit ``i`` (input bits: state 0..31, then data bits).
"""

from functools import lru_cache

from amaranth.hdl import Cat, Const, Mux, Signal, Value

__all__ = [
    "POLY", "CRC_INIT", "crc32_bitwise", "update_matrix", "zero_matrix", "mat_apply", "mat_mul",
    "mat_inverse", "mat_pow", "seed_state", "mat_vec", "crc_update", "undo_zeros",
]

POLY = 0xEDB88320      # x^32 + x^26 + ... + 1, bit-reversed (reflected CRC-32)
CRC_INIT = 0xFFFFFFFF  # initial register value; zlib's result is the register inverted
_MASK32 = 0xFFFFFFFF
_IDENTITY = tuple(1 << i for i in range(32))
_GROUP = 4             # input bits per constant table in mat_vec


def crc32_bitwise(state, data):
    """The raw register after ``data`` from raw register ``state``, one bit at a time."""
    for byte in data:
        state ^= byte
        for _ in range(8):
            state = (state >> 1) ^ (POLY if state & 1 else 0)
    return state


def _rows_from_columns(columns):
    """32 row masks from a list of 32-bit column values (column ``k`` = image of input bit k)."""
    rows = [0] * 32
    for k, col in enumerate(columns):
        for i in range(32):
            if col >> i & 1:
                rows[i] |= 1 << k
    return tuple(rows)


@lru_cache(maxsize=None)
def update_matrix(nbytes):
    """Rows of ``[M_n | G_n]``: inputs are the 32 state bits then ``8 * nbytes`` data bits."""
    if nbytes < 0:
        raise ValueError(f"a beat has 0 or more bytes, not {nbytes}")
    columns = [crc32_bitwise(1 << k, bytes(nbytes)) for k in range(32)]
    for k in range(8 * nbytes):
        data = bytearray(nbytes)
        data[k // 8] = 1 << (k % 8)
        columns.append(crc32_bitwise(0, data))
    return _rows_from_columns(columns)


def mat_apply(rows, value):
    """A matrix times a bit vector (both as ints)."""
    return sum(((bin(row & value).count("1") & 1) << i) for i, row in enumerate(rows))


def mat_mul(a, b):
    """Rows of ``a @ b`` for 32x32 matrices (apply ``b`` first, then ``a``)."""
    out = []
    for row in a:
        acc = 0
        for k in range(32):
            if row >> k & 1:
                acc ^= b[k]
        out.append(acc)
    return tuple(out)


def mat_inverse(rows):
    """The inverse of an invertible 32x32 matrix (Gauss-Jordan over GF(2))."""
    work = [(row, 1 << i) for i, row in enumerate(rows)]   # [A | I], row by row
    for col in range(32):
        pivot = next((r for r in range(col, 32) if work[r][0] >> col & 1), None)
        if pivot is None:
            raise ValueError("matrix is singular")
        work[col], work[pivot] = work[pivot], work[col]
        for r in range(32):
            if r != col and work[r][0] >> col & 1:
                work[r] = (work[r][0] ^ work[col][0], work[r][1] ^ work[col][1])
    return tuple(inv for _, inv in work)


def mat_pow(rows, n):
    """``rows`` to the power ``n`` (``n`` >= 0) by squaring."""
    result, base = _IDENTITY, rows
    while n:
        if n & 1:
            result = mat_mul(base, result)
        base = mat_mul(base, base)
        n >>= 1
    return result


@lru_cache(maxsize=None)
def zero_matrix(n):
    """The state map of ``n`` zero bytes; negative ``n`` undoes ``-n`` zero bytes."""
    one = tuple(row & _MASK32 for row in update_matrix(1))
    if n < 0:
        return mat_pow(mat_inverse(one), -n)
    return mat_pow(one, n)


def seed_state(prefix, skip):
    """The raw state that, after ``skip`` zero bytes, equals the register after ``prefix``.

    A block that zeroes the first ``skip`` bytes of a frame's first beat(s) starts from this
    constant instead of ``CRC_INIT``; ``prefix`` (e.g. the ICRC's 8 bytes of 0xFF) is folded in too.
    """
    return mat_apply(zero_matrix(-skip), crc32_bitwise(CRC_INIT, prefix))


def mat_vec(m, rows, vector, name):
    """Amaranth: a 32-bit Signal (driven in ``m.d.comb``) holding ``rows`` times ``vector``.

    Each group of 4 input bits selects its 32-bit contribution (the XOR of the matrix columns of
    the bits set) from a 16-entry constant table, and the contributions are XORed in a balanced
    tree. After synthesis that is the usual XOR network (a 4-input table per output bit is an
    XOR of up to 4 bits); in an event-driven simulator (Icarus) it costs a few hundred word-wide
    operations per change instead of one single-bit select per matrix entry: about 4 times
    faster for the 512-bit beat.
    """
    vector = Value.cast(vector)
    held = Signal(len(vector), name=f"{name}_in")
    m.d.comb += held.eq(vector)
    partials = []
    for base in range(0, len(vector), _GROUP):
        width = min(_GROUP, len(vector) - base)
        table = Cat(*(Const(mat_apply(rows, value << base), 32) for value in range(1 << width)))
        partial = Signal(32, name=f"{name}_p{base // _GROUP}")
        m.d.comb += partial.eq(table.word_select(held[base:base + width], 32))
        partials.append(partial)
    while len(partials) > 1:
        partials = [partials[i] ^ partials[i + 1] if i + 1 < len(partials) else partials[i]
                    for i in range(0, len(partials), 2)]
    out = Signal(32, name=name)
    m.d.comb += out.eq(partials[0])
    return out


def crc_update(m, state, data, name="crc"):
    """Amaranth: a 32-bit Signal (driven in ``m.d.comb``) holding the raw state after the beat
    ``data`` (lane order, a whole number of bytes) from raw state ``state``."""
    data = Value.cast(data)
    if len(data) % 8:
        raise ValueError(f"a beat is whole bytes, not {len(data)} bits")
    rows = update_matrix(len(data) // 8)
    # M_n s and G_n d apart: the wide data term then changes only when the data does.
    from_state = mat_vec(m, [row & _MASK32 for row in rows], state, f"{name}_state")
    from_data = mat_vec(m, [row >> 32 for row in rows], data, f"{name}_data")
    out = Signal(32, name=name)
    m.d.comb += out.eq(from_state ^ from_data)
    return out


def undo_zeros(m, state, count, *, base=0, step=1, name="unzero"):
    """Amaranth: a 32-bit Signal (driven in ``m.d.comb``) holding the raw state before
    ``base + step * count`` zero bytes led to raw state ``state``.

    ``count`` is an unsigned Value; one conditional matrix stage per bit of ``count`` (log depth),
    plus one fixed stage when ``base`` is not 0.
    """
    if base < 0 or step < 1:
        raise ValueError(f"undo_zeros needs base >= 0 and step >= 1, not {base}, {step}")
    count = Value.cast(count)
    stages = [(zero_matrix(-base), None)] if base else []
    stages += [(zero_matrix(-(step << i)), count[i]) for i in range(len(count))]
    current = Value.cast(state)
    for index, (rows, select) in enumerate(stages, start=1):
        undone = mat_vec(m, rows, current, f"{name}_{index}")
        stage = Signal(32, name=f"{name}_{index}_out")
        m.d.comb += stage.eq(undone if select is None else Mux(select, undone, current))
        current = stage
    return current
