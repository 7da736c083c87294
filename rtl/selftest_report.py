# SPDX-License-Identifier: BSD-2-Clause
"""The self-test's periodic text report: counters as hexadecimal and a status word, on a UART."""

import re

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .uart_tx import UartTx

__all__ = ["Reporter", "template_items"]

_FIELD = re.compile(r"\{(\w+)\}")


def template_items(template, fields, words):
    """The characters of one line: a literal (str of one character), ``("hex", field,
    nibble)`` (a hexadecimal digit of a 32-bit field, most significant first) or ``("word",
    k)`` (character k of the status word). ``{name}`` in ``template`` is a field of ``fields``
    (eight digits) and ``{status}`` the status word (all ``words`` have one length)."""
    items = []
    pos = 0
    for match in _FIELD.finditer(template):
        items += list(template[pos:match.start()])
        name = match.group(1)
        if name == "status":
            items += [("word", k) for k in range(len(words[0]))]
        elif name in fields:
            items += [("hex", fields.index(name), n) for n in range(7, -1, -1)]
        else:
            raise ValueError(f"Reporter: template field {{{name}}} is not one of "
                             f"{list(fields) + ['status']}")
        pos = match.end()
    return items + list(template[pos:])


class Reporter(wiring.Component):
    """Every ``period`` cycles, sends one line of text on ``tx`` (8N1 at ``baud``).

    The line is ``template`` with ``{name}`` replaced by the 32-bit input ``v_<name>`` in eight
    lowercase hexadecimal digits and ``{status}`` by ``words[status]``. The values and the status
    are sampled when a line starts, so one line is consistent. A line that would start while the
    previous one is still being sent waits for it.

    Parameters
    ----------
    template : str
        The line, e.g. ``"sent={sent} {status}\\r\\n"``; ASCII only.
    fields : sequence of str
        The field names (each gets an input ``v_<name>``).
    words : sequence of str
        The status words, all of one length, indexed by ``status``.
    clk_hz, baud : int
        Clock and bit rate (see :class:`rtl.uart_tx.UartTx`).
    period : int
        Cycles from one line's start to the next (at least 1).

    Ports
    -----
    ``v_<name>`` (32 bits each), ``status`` in; ``tx`` out (idles at 1); ``clk``, ``rst``.
    """

    def __init__(self, template, fields, words, clk_hz, baud, period):
        fields = tuple(fields)
        self.words = tuple(words)
        if not self.words or len({len(w) for w in self.words}) != 1:
            raise ValueError(f"Reporter: status words must have one length, not {self.words!r}")
        if not template.isascii() or not all(w.isascii() for w in self.words):
            raise ValueError("Reporter: the template and the words must be ASCII")
        if not isinstance(period, int) or period < 1:
            raise ValueError(f"Reporter: period must be a positive integer, not {period!r}")
        self.items = template_items(template, fields, self.words)
        self.fields = fields
        self.period = period
        self.uart = UartTx(clk_hz, baud)
        super().__init__({
            **{f"v_{name}": In(32) for name in fields},
            "status": In(range(len(self.words))),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart = uart = self.uart
        m.d.comb += self.tx.eq(uart.tx)

        snap = [Signal(32, name=f"snap_{name}") for name in self.fields]
        status = Signal.like(self.status)
        timer = Signal(range(self.period))
        due = Signal()
        active = Signal()
        pos = Signal(range(len(self.items)))
        with m.If(timer == self.period - 1):
            m.d.sync += [timer.eq(0), due.eq(1)]
        with m.Else():
            m.d.sync += timer.eq(timer + 1)
        with m.If(due & ~active):
            m.d.sync += [due.eq(0), active.eq(1), pos.eq(0), status.eq(self.status)]
            m.d.sync += [s.eq(getattr(self, f"v_{name}")) for s, name in zip(snap, self.fields)]

        char = Signal(8)
        nibble = Signal(4)
        is_hex = Signal()
        with m.Switch(pos):
            for index, item in enumerate(self.items):
                with m.Case(index):
                    if isinstance(item, str):
                        m.d.comb += char.eq(ord(item))
                    elif item[0] == "hex":
                        _, field, n = item
                        m.d.comb += [is_hex.eq(1), nibble.eq(snap[field][4 * n:4 * n + 4])]
                    else:
                        word_char = Const(ord(self.words[0][item[1]]), 8)
                        for k, word in enumerate(self.words[1:], 1):
                            word_char = Mux(status == k, ord(word[item[1]]), word_char)
                        m.d.comb += char.eq(word_char)
        digit = Mux(nibble < 10, ord("0") + nibble, ord("a") - 10 + nibble)
        m.d.comb += [uart.data.eq(Mux(is_hex, digit, char)), uart.valid.eq(active)]
        with m.If(uart.valid & uart.ready):
            with m.If(pos == len(self.items) - 1):
                m.d.sync += active.eq(0)
            with m.Else():
                m.d.sync += pos.eq(pos + 1)
        return m
