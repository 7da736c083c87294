# SPDX-License-Identifier: BSD-2-Clause
"""Looking registers up by name, with readable errors: the counter catalogues of the driver
objects and the checks of indices and field values."""

import difflib
import operator

from .access import DriverError

__all__ = ["Counters", "check_int", "check_index", "pick"]


def _suggest(name, known):
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def pick(node, what, name, known):
    """``known[name]``, or a :class:`DriverError` naming the close matches and every choice."""
    if name in known:
        return known[name]
    raise DriverError(f"{node}: no {what} {name!r}{_suggest(str(name), list(map(str, known)))} "
                      f"(known: {', '.join(map(str, known))})")


def _as_int(node, what, value):
    if isinstance(value, bool):
        raise DriverError(f"{node}: {what} must be an integer, not {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise DriverError(f"{node}: {what} must be an integer, not {value!r}") from None


def check_int(node, what, value, low, high):
    """``value`` as an int in ``low..high`` (inclusive), or a :class:`DriverError`."""
    value = _as_int(node, what, value)
    if not low <= value <= high:
        form = "{:#x}" if high > 0xFFFF else "{}"
        raise DriverError(f"{node}: {what} {form.format(value)} is out of range "
                          f"{form.format(low)}..{form.format(high)}")
    return value


def check_index(node, what, value, count, param=None):
    """An index ``value`` below ``count``, or a :class:`DriverError` giving the range (and the
    parameter ``param`` that sets it)."""
    value = _as_int(node, what, value)
    if not 0 <= value < count:
        why = f" ({param} = {count})" if param else ""
        raise DriverError(f"{node}: {what} {value} is out of range 0..{count - 1}{why}")
    return value


class Counters:
    """A node's counters by name: ``block.name`` or, where only one block has it, ``name``.

    Parameters
    ----------
    kind : str
        What the node is, for messages (``"NIC"``, ``"switch"``).
    index : str
        The name of the index of per-unit counters (``"plane"``, ``"port"``).
    plain : dict
        ``{block: {counter name: block-local word address}}``: one counter per node.
    indexed : dict
        ``{block: (counter names, word(unit, name))}``: one counter per plane or port.
    index_param : str, optional
        The parameter that sets how many units there are (for messages).
    """

    def __init__(self, kind, index, plain, indexed, index_param=None):
        self.kind, self.index, self.index_param = kind, index, index_param
        self.plain = {block: dict(words) for block, words in plain.items()}
        self.indexed = {block: (tuple(names), fn) for block, (names, fn) in indexed.items()}
        self.by_short = {}
        for block, words in self.plain.items():
            for name in words:
                self.by_short.setdefault(name, []).append((block, name, False))
        for block, (names, _) in self.indexed.items():
            for name in names:
                self.by_short.setdefault(name, []).append((block, name, True))

    def names(self):
        """Every qualified name (``block.name``), plain counters first."""
        out = [f"{b}.{n}" for b, words in self.plain.items() for n in words]
        return out + [f"{b}.{n}" for b, (names, _) in self.indexed.items() for n in names]

    def blocks(self):
        return list(dict.fromkeys(list(self.plain) + list(self.indexed)))

    def resolve(self, node, name):
        """``(block, counter, per_unit)`` of ``name``, or a :class:`DriverError`."""
        if not isinstance(name, str):
            raise DriverError(f"{node}: a counter name is a string, not {name!r}")
        if "." in name:
            block, short = name.split(".", 1)
            if block not in self.plain and block not in self.indexed:
                raise DriverError(f"{node}: no block {block!r} with counters"
                                  f"{_suggest(block, self.blocks())} (blocks: "
                                  f"{', '.join(self.blocks())})")
            if short in self.plain.get(block, {}):
                return block, short, False
            if short in self.indexed.get(block, ((), None))[0]:
                return block, short, True
            known = list(self.plain.get(block, {})) + list(self.indexed.get(block, ((),))[0])
            raise DriverError(f"{node}: block {block} has no counter {short!r}"
                              f"{_suggest(short, known)} (its counters: {', '.join(known)})")
        found = self.by_short.get(name, [])
        if len(found) == 1:
            return found[0]
        if not found:
            raise DriverError(f"{node}: no {self.kind} counter {name!r}"
                              f"{_suggest(name, list(self.by_short) + self.names())} "
                              f"(names are block.counter; blocks: {', '.join(self.blocks())})")
        raise DriverError(f"{node}: counter {name!r} is ambiguous: "
                          f"{', '.join(f'{b}.{n}' for b, n, _ in found)}; name the block")

    def word(self, node, name, unit, units):
        """``(block, block-local word, qualified name)`` of counter ``name`` of ``unit`` (None
        for a per-node counter; an index below ``units`` for a per-plane or per-port one)."""
        block, short, per_unit = self.resolve(node, name)
        if per_unit:
            if unit is None:
                raise DriverError(f"{node}: counter {block}.{short} is one per {self.index}: "
                                  f"give {self.index}=0..{units - 1}")
            check_index(node, self.index, unit, units, self.index_param)
            return block, self.indexed[block][1](unit, short), f"{block}.{short}"
        if unit is not None:
            raise DriverError(f"{node}: counter {block}.{short} is not per {self.index}; "
                              f"give no {self.index}")
        return block, self.plain[block][short], f"{block}.{short}"
