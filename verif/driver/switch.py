# SPDX-License-Identifier: BSD-2-Clause
"""The host-side drivers of the trimming switch (``rtl/switch.py``: its uN stage's map
``rtl/un_stage.py`` below word 0x8000, per-port registers and counters, read-only sizes) and of
the RTL fabric's fault-injectable link (``rtl/link.py``), every word from their map constants."""

import inspect

from models.link import COUNTERS as _LINK_COUNTER_NAMES
from models.link import REGISTER_BITS as LINK_REGISTER_BITS
from models.switch import EGRESS_COUNTERS, INGRESS_COUNTERS, MAX_PORTS
from models.usid import KEY_BITS, USID_BITS
from rtl import switch as switch_map
from rtl import un_stage as un_map
from rtl.link import ADDR as LINK_ADDR
from rtl.link import ADDR_COUNTERS as LINK_ADDR_COUNTERS
from rtl.link import ADDR_LEVEL as LINK_ADDR_LEVEL
from rtl.link import ADDR_LFSR as LINK_ADDR_LFSR
from rtl.switch_egress import THRESHOLD_BITS

from .access import MASK32, READ, WRITE, DriverError, as_access, operation
from .names import Counters, check_index, check_int, pick

__all__ = ["Switch", "Link", "SWITCH_COUNTERS", "LINK_COUNTERS", "SWITCH_DEFAULTS"]

SWITCH_DEFAULTS = {name: p.default for name, p in
                   inspect.signature(switch_map.Switch).parameters.items()
                   if p.default is not inspect.Parameter.empty}

# Every counter of the switch: the uN stage's (one per switch, by decision) and one set per port
# (egress: admission, trim, ECN, drops; ingress: drops), docs/protocol.md sections 3, 6, 7.
SWITCH_COUNTERS = Counters("switch", "port", plain={"un": un_map.ADDR_COUNTERS}, indexed={
    "egress": (EGRESS_COUNTERS, switch_map.egress_counter),
    "ingress": (INGRESS_COUNTERS, switch_map.ingress_counter),
}, index_param="ports")
LINK_COUNTERS = Counters("link", "direction", plain={"link": LINK_ADDR_COUNTERS}, indexed={})
_LFSR_BITS = 16                 # rtl/switch.py map: a write loads bits 15..0 (0 is ignored)


class Switch:
    """The driver of one trimming switch over any register access (see :mod:`verif.driver`).

    Parameters
    ----------
    access : Access or object
        The switch's own 16-bit word map: anything :func:`verif.driver.as_access` takes.
    ports : int
        K, the switch's ports (default: :class:`rtl.switch.Switch`'s); bounds port indices.
    table_depth : int, optional
        Entries of its route table; when not given, only the uN stage's largest table bounds
        the index.
    name : str
        Starts every error message.

    Notes
    -----
    The queue limits (``data_limit``, ``control_limit``), the trim size and the largest frame
    are build parameters: :meth:`info` reads them, nothing writes them. ECN marking is set per
    port by Kmin and Kmax (:meth:`set_ecn`), a port's random draws by its LFSR
    (:meth:`seed_lfsr`).
    """

    def __init__(self, access, ports=None, table_depth=None, name="switch"):
        self.access = as_access(access)
        self.name = name
        self.ports = check_int(name, "ports", SWITCH_DEFAULTS["ports"] if ports is None else
                               ports, 1, MAX_PORTS)
        self.table_depth = un_map.MAX_TABLE_DEPTH if table_depth is None else check_int(
            name, "table_depth", table_depth, 1, un_map.MAX_TABLE_DEPTH)

    def __repr__(self):
        return f"Switch({self.name}, {self.ports} ports)"

    def _port(self, port):
        return check_index(self.name, "port", port, self.ports, "ports")

    @operation
    def read(self, word):
        """Word ``word`` of the switch's map (below the named operations)."""
        return (yield READ, check_int(self.name, "word address", word, 0, 0xFFFF))

    @operation
    def write(self, word, value):
        """Write ``value`` to word ``word`` of the switch's map."""
        yield WRITE, check_int(self.name, "word address", word, 0, 0xFFFF), check_int(
            self.name, f"word {word:#x}", value, 0, MASK32)

    # --- uN stage: own uSID and the static route table (docs/protocol.md section 3) ----------

    @operation
    def set_own_usid(self, usid):
        """The switch's own uSID (a frame whose active uSID it is gets shifted)."""
        yield WRITE, un_map.ADDR_OWN_USID, check_int(self.name, "own uSID", usid, 0,
                                                     (1 << USID_BITS) - 1)

    @operation
    def set_own_block(self, block):
        """The switch's own locator block, DA[127:96]."""
        yield WRITE, un_map.ADDR_OWN_BLOCK, check_int(self.name, "locator block", block, 0,
                                                      MASK32)

    def _entry(self, index):
        check_index(self.name, "route entry", index, self.table_depth, "table_depth")
        return un_map.TABLE_BASE + un_map.TABLE_STRIDE * index

    @operation
    def write_route(self, index, key, port, valid=True):
        """Route table entry ``index``: exact-match ``key`` (48 bits: block << 16 | uSID) ->
        egress ``port``; written key low, key high, port, valid."""
        base = self._entry(index)
        key = check_int(self.name, "route key", key, 0, (1 << KEY_BITS) - 1)
        self._port(port)
        yield WRITE, base + un_map.ENTRY_KEY_LO, key & MASK32
        yield WRITE, base + un_map.ENTRY_KEY_HI, key >> 32
        yield WRITE, base + un_map.ENTRY_PORT, port
        yield WRITE, base + un_map.ENTRY_VALID, int(bool(valid))

    @operation
    def clear_route(self, index):
        """Route table entry ``index`` no longer valid."""
        yield WRITE, self._entry(index) + un_map.ENTRY_VALID, 0

    @operation
    def write_routes(self, routes):
        """The route table from entry 0: ``routes`` is ``{key: port}`` (written in key order,
        as :meth:`models.fabric_topology.Topology.routes` gives them) or ``(key, port)`` pairs
        (in their order). Returns the entries written."""
        items = sorted(routes.items()) if isinstance(routes, dict) else list(routes)
        if len(items) > self.table_depth:
            raise DriverError(f"{self.name}: {len(items)} routes for a table of "
                              f"{self.table_depth} entries")
        for i, (key, port) in enumerate(items):
            yield from self.write_route.steps(i, key, port)
        return len(items)

    @operation
    def route(self, index):
        """Route table entry ``index`` read back: ``dict(key, port, valid)``."""
        base = self._entry(index)
        lo = yield READ, base + un_map.ENTRY_KEY_LO
        hi = yield READ, base + un_map.ENTRY_KEY_HI
        port = yield READ, base + un_map.ENTRY_PORT
        valid = yield READ, base + un_map.ENTRY_VALID
        return dict(key=hi << 32 | lo, port=port, valid=valid & 1)

    # --- ports (docs/protocol.md sections 6, 7) ----------------------------------------------

    @operation
    def set_port(self, port, up=None, fabric=None):
        """Port ``port`` up or down (down flushes its queues) and fabric-facing or not; what is
        not given stays as it is."""
        addr = switch_map.port_reg(self._port(port), switch_map.REG_CTRL)
        if up is None and fabric is None:
            raise DriverError(f"{self.name}: set_port({port}) needs up= or fabric=")
        ctrl = 0
        if up is None or fabric is None:
            ctrl = yield READ, addr
        for bit, value in ((switch_map.CTRL_UP, up), (switch_map.CTRL_FABRIC, fabric)):
            if value is not None:
                ctrl = ctrl | 1 << bit if value else ctrl & ~(1 << bit)
        yield WRITE, addr, ctrl

    @operation
    def port_up(self, port):
        """Port ``port`` up."""
        yield from self.set_port.steps(port, up=True)

    @operation
    def port_down(self, port):
        """Port ``port`` down: its queues flushed, frames to it dropped and counted."""
        yield from self.set_port.steps(port, up=False)

    @operation
    def set_ecn(self, port, kmin, kmax):
        """Port ``port``'s ECN thresholds Kmin and Kmax in bytes (docs/protocol.md section 7)."""
        self._port(port)
        top = (1 << THRESHOLD_BITS) - 1
        kmin = check_int(self.name, "Kmin", kmin, 0, top)
        kmax = check_int(self.name, "Kmax", kmax, 0, top)
        yield WRITE, switch_map.port_reg(port, switch_map.REG_KMIN), kmin
        yield WRITE, switch_map.port_reg(port, switch_map.REG_KMAX), kmax

    @operation
    def seed_lfsr(self, port, seed):
        """Load port ``port``'s LFSR (its ECN draws) with ``seed``, 1..0xFFFF."""
        self._port(port)
        yield WRITE, switch_map.port_reg(port, switch_map.REG_LFSR), check_int(
            self.name, "LFSR seed", seed, 1, (1 << _LFSR_BITS) - 1)

    @operation
    def port_state(self, port):
        """Port ``port``: ``up``, ``fabric``, ``lfsr``, ``kmin``, ``kmax`` and the bytes in its
        data and control queues."""
        self._port(port)
        reg = lambda r: switch_map.port_reg(port, r)  # noqa: E731
        ctrl = yield READ, reg(switch_map.REG_CTRL)
        return dict(up=ctrl >> switch_map.CTRL_UP & 1, fabric=ctrl >> switch_map.CTRL_FABRIC & 1,
                    lfsr=(yield READ, reg(switch_map.REG_LFSR)),
                    kmin=(yield READ, reg(switch_map.REG_KMIN)),
                    kmax=(yield READ, reg(switch_map.REG_KMAX)),
                    data=(yield READ, reg(switch_map.REG_Q_DATA)),
                    control=(yield READ, reg(switch_map.REG_Q_CONTROL)))

    @operation
    def info(self):
        """The read-only sizes: ports, data and core width, trim size, queue limits, largest
        frame."""
        out = {}
        for i, name in enumerate(switch_map.INFO):
            out[name] = yield READ, switch_map.INFO_BASE + i
        return out

    # --- counters ------------------------------------------------------------------------------

    def counter_names(self):
        """Every counter's qualified name (``un.*`` per switch, ``egress.*`` and ``ingress.*``
        per port)."""
        return SWITCH_COUNTERS.names()

    def counter_addr(self, name, port=None):
        """The word address of counter ``name`` (of ``port`` for a per-port one)."""
        return SWITCH_COUNTERS.word(self.name, name, port, self.ports)[1]

    @operation
    def counter(self, name, port=None):
        """Counter ``name``: ``"egress.trimmed"`` (with ``port``), ``"ingress.dropped_overflow"``
        (with ``port``), ``"un.no_route"``; a name only one block has may drop the block."""
        return (yield READ, self.counter_addr(name, port))

    @operation
    def clear_counter(self, name, port=None):
        """Clear counter ``name`` (a write clears a counter)."""
        yield WRITE, self.counter_addr(name, port), 0

    @operation
    def counters(self, port=None):
        """Every counter: ``{"un.name": v, "egress.name[p]": v, "ingress.name[p]": v}`` (only
        port ``port``'s per-port ones when given)."""
        out = {}
        for name, word in SWITCH_COUNTERS.plain["un"].items():
            out[f"un.{name}"] = yield READ, word
        ports = range(self.ports) if port is None else [self._port(port)]
        for p in ports:
            for block, (names, fn) in SWITCH_COUNTERS.indexed.items():
                for name in names:
                    out[f"{block}.{name}[{p}]"] = yield READ, fn(p, name)
        return out


class Link:
    """The driver of one direction of the RTL fabric's fault-injectable link (``rtl/link.py``):
    its registers (``up``, ``loss``, ``seed``, ``delay``, ``rate``) and counters by name.

    Parameters
    ----------
    access : Access or object
        The link's own word map: anything :func:`verif.driver.as_access` takes.
    name : str
        Starts every error message.
    """

    def __init__(self, access, name="link"):
        self.access = as_access(access)
        self.name = name

    def __repr__(self):
        return f"Link({self.name})"

    @operation
    def set(self, register, value):
        """Register ``register`` (:data:`rtl.link.ADDR`) = ``value``."""
        addr = pick(self.name, "link register", register, LINK_ADDR)
        bits = LINK_REGISTER_BITS[register]
        yield WRITE, addr, check_int(self.name, register, value, 0, (1 << bits) - 1)

    @operation
    def get(self, register):
        """Register ``register`` read back; also ``"lfsr"`` and ``"level"`` (read only)."""
        ro = {"lfsr": LINK_ADDR_LFSR, "level": LINK_ADDR_LEVEL}
        return (yield READ, pick(self.name, "link register", register, {**LINK_ADDR, **ro}))

    @operation
    def cut(self):
        """Frames stop crossing (cut)."""
        yield from self.set.steps("up", 0)

    @operation
    def heal(self):
        """Frames cross again."""
        yield from self.set.steps("up", 1)

    @operation
    def counter(self, name):
        """Counter ``name`` (:data:`models.link.COUNTERS`: ``frames_passed``, ...)."""
        block, word, _ = LINK_COUNTERS.word(self.name, name, None, 1)
        return (yield READ, word)

    @operation
    def counters(self):
        """Every counter by name."""
        out = {}
        for name in _LINK_COUNTER_NAMES:
            out[name] = yield READ, LINK_ADDR_COUNTERS[name]
        return out
