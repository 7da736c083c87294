# SPDX-License-Identifier: BSD-2-Clause
"""The host-side driver of one NIC engine top (``rtl/nic_engine.py``) over its configuration map:
QPs, EV sets, memory regions, addresses, planes, counters, status; and the records a host puts on
the NIC's streams (work requests, EV events) or takes from them (completions).

Every register address comes from the blocks' own map constants (``rtl/*.py`` and
``models/*.py``); each block's base and address width, and the packed fields of the words the
driver decodes, come from ``rtl/regmap.py`` (``NIC_BLOCKS``, ``FIELDS``), the same source as the
generated SystemRDL, C header, IP-XACT and register document (docs/registers.md section 6).
"""

import inspect

from models import header_inserter as inserter_map
from models import placement as placement_map
from models import plane_splitter as splitter_map
from models import rx_front as front_model
from models import segmenter as seg_map
from models import tx_path as path_model
from models.fabric_nic import region_base, region_rkey
from models.fabric_topology import nic_address, port_mac
from models.packets import PSN_MODULUS
from models.records import COMPLETION, EV_EVENT, WORK_REQUEST, CompletionStatus, EvEvent
from models.reliability import K_BITS, RETRY_BITS, W_BITS
from models.spray import EV_BITS, LFSR_BITS, SlotState
from rtl import plane_splitter as split_map
from rtl import regmap
from rtl import reliability as rel_map
from rtl import rx_engine as rx_map
from rtl import rx_front as front_map
from rtl import rx_tracker as tracker_map
from rtl import spray_scheduler as spray_map
from rtl import tx_path as path_map
from rtl.nic_engine import ENGINE_COUNTERS, ENGINE_INFO, ENGINE_STATUS, ENGINE_TICKS, NicEngine

from .access import MASK32, READ, WRITE, DriverError, as_access, operation
from .names import Counters, check_index, check_int, pick

__all__ = ["Nic", "NIC_COUNTERS", "NIC_BLOCKS", "NIC_DEFAULTS", "REGION_BYTES", "work_request",
           "completion", "ev_event", "table_write"]

REGION_BYTES = 1 << 22          # the length of the region configure() registers per QP
NIC_DEFAULTS = {name: p.default for name, p in inspect.signature(NicEngine).parameters.items()
                if p.default is not inspect.Parameter.empty}

# The NIC's blocks with a map of their own: the transmit engine's sub-blocks
# (rtl/tx_engine.py BLOCKS), the receive engine's (rtl/rx_engine.py, one 0x1000-word page each),
# the reliability block and the engine's own words (rtl/nic_engine.py BLOCKS), as
# rtl/regmap.py places them (its NIC_BLOCKS: base and address width of each).
NIC_BLOCKS = tuple(regmap.NIC_BLOCKS)

# Every counter of the NIC by block (32 bits, cleared when written; rtl/common/config.py).
NIC_COUNTERS = Counters("NIC", "plane", plain={
    "spray": spray_map.ADDR_COUNTERS,
    "segmenter": seg_map.COUNTERS,
    "tx_path": path_model.COUNTERS,
    "header_inserter": inserter_map.COUNTERS,
    "plane_splitter": splitter_map.COUNTERS,
    "rx_front": front_map.ADDR_COUNTERS,
    "rx_tracker": tracker_map.ADDR_COUNTERS,
    "placement": placement_map.COUNTERS,
    "reliability": rel_map.ADDR_COUNTERS,
    "engine": ENGINE_COUNTERS,
}, indexed={
    "plane_splitter": (splitter_map.PLANE_COUNTERS, split_map.plane_counter_addr),
    "rx_front": (front_model.PLANE_COUNTERS, front_map.plane_reg),
}, index_param="n_planes")

# Packed words: (field, lowest bit, width), from rtl/regmap.py FIELDS (the blocks' docstrings).
_ENGINE_INFO_FIELDS = regmap.fields("engine", "info")
_ENGINE_STATUS_FIELDS = regmap.fields("engine", "status")
_REL_INFO_FIELDS = regmap.fields("reliability", "info")
_TRACKER_INFO_FIELDS = regmap.fields("rx_tracker", "info")
_REL_SETUP_FIELDS = regmap.fields("reliability", "qp.cack")
_REL_QP_INFO_FIELDS = regmap.fields("reliability", "qp.info")
_TRACKER_CACK_FIELDS = regmap.fields("rx_tracker", "qp.cack")
_SEG_COUNTS_FIELDS = regmap.fields("segmenter", "qp.counts")
_PROBE_FIELDS = regmap.fields("reliability", "probe_entry.state")


def _field(block, register, name):
    """``(lowest bit, width)`` of field ``name`` of a packed word (rtl/regmap.py FIELDS)."""
    for field, lsb, width in regmap.fields(block, register):
        if field == name:
            return lsb, width
    raise KeyError(f"{block}.{register} has no field {name}")


# Fields of written words.
_SEG_ENABLE = 1 << _field("segmenter", "qp_context", "enable")[0]
_T0_BITS = _field("tx_path", "qp.peer_path", "peer_t0")[1]
_PORT_SHIFT = _field("tx_path", "qp.peer_path", "peer_port")[0]
_SEED_MAX = (1 << LFSR_BITS) - 1          # rtl/spray_scheduler.py: LFSR seed 1..0xFFFF
_MAC_BITS = 48
_RELIABILITY_PARAMS = (                   # rtl/reliability.py map: QpConfig field, offset, bits
    ("w_max", rel_map.OFF_W_MAX, W_BITS), ("mpr", rel_map.OFF_MPR, W_BITS),
    ("timeout_exp", rel_map.OFF_K, K_BITS), ("retry_limit", rel_map.OFF_RETRY, RETRY_BITS),
    ("probe_period", rel_map.OFF_PERIOD, None))       # None: timer_bits


def _fields(word, spec):
    return {name: word >> low & ((1 << width) - 1) for name, low, width in spec}


def _mask_words(mask, words):
    return [mask >> (32 * k) & MASK32 for k in range(words)]


# --- records on the NIC's streams (no register path) --------------------------------------------

def work_request(qpn, local_addr, remote_va, rkey, length, imm=None, req_id=0):
    """A packed :data:`models.records.WORK_REQUEST` for the NIC's ``s_wr`` stream.

    The NIC takes work requests on a stream only (docs/protocol.md section 8): there is no
    register to post one, so the driver builds the record and the host's stream source sends it
    (:class:`verif.host_traffic.HostTraffic` in the benches).

    Parameters
    ----------
    qpn, local_addr, remote_va, rkey, length : int
        The RDMA Write: QP, source address in host memory, destination VA and R_Key at the
        peer, length in bytes.
    imm : int, optional
        The immediate of a Write with Immediate.
    req_id : int
        The request id the completion carries back.
    """
    return WORK_REQUEST.pack(qpn=qpn, local_addr=local_addr, remote_va=remote_va, rkey=rkey,
                             length=length, has_imm=int(imm is not None), imm=imm or 0,
                             req_id=req_id)


_STATUS_NAMES = {v: k for k, v in vars(CompletionStatus).items() if not k.startswith("_")}
_EV_KINDS = {k.lower(): v for k, v in vars(EvEvent).items() if not k.startswith("_")}


def completion(word):
    """The fields of a packed :data:`models.records.COMPLETION` from the NIC's ``m_cpl`` stream,
    with ``status_name`` (``"OK"``, ``"RETRY_EXCEEDED"``, ...). Completions leave on a stream
    only; the registers count them (:meth:`Nic.completions`)."""
    rec = COMPLETION.unpack(word)
    rec["status_name"] = _STATUS_NAMES.get(rec["status"], f"unknown {rec['status']}")
    return rec


def ev_event(qpn, ev, kind):
    """A packed :data:`models.records.EV_EVENT` for the NIC's ``s_ev`` stream (a host's DENY or
    ALLOW of an EV, docs/protocol.md 4.4); ``kind`` by name (``"deny"``) or value. Host EV events
    have no register path."""
    if isinstance(kind, str):
        kind = pick("EV event", "kind", kind.lower(), _EV_KINDS)
    return EV_EVENT.pack(qpn=qpn, ev=ev, kind=kind)


class Nic:
    """The driver of one NIC engine top over any register access.

    Every operation is one call: on a synchronous access (:class:`verif.driver.SyncAccess`, a
    ``(read, write)`` pair of callables) it returns its result; on an asynchronous one
    (:class:`verif.bench.ConfigDriver`, an AXI4-Lite window) it returns an awaitable.

    Parameters
    ----------
    access : Access or object
        The NIC's own 25-bit word map (``rtl/nic_engine.py``): anything :func:`as_access` takes.
    params : dict, optional
        The :class:`rtl.nic_engine.NicEngine` parameters of this NIC (the defaults for those
        missing); they bound the QP, plane, slot, pool, region and probe indices.
    name : str
        Starts every error message.

    Notes
    -----
    Work requests and host EV events reach the NIC on streams, completions leave on one: there
    is no register path for them. :func:`work_request`, :func:`ev_event` and
    :func:`completion` build and read those records; :meth:`completions` reads the counts the
    registers keep.
    """

    def __init__(self, access, params=None, name="NIC"):
        self.access = as_access(access)
        unknown = set(params or {}) - set(NIC_DEFAULTS)
        if unknown:
            raise DriverError(f"{name}: unknown NicEngine parameters {sorted(unknown)}")
        self.p = {**NIC_DEFAULTS, **(params or {})}
        self.name = name
        self.n_qps, self.n_planes = self.p["n_qps"], self.p["n_planes"]

    def __repr__(self):
        return f"Nic({self.name}, {self.n_qps} QPs, {self.n_planes} planes)"

    # --- addresses ---------------------------------------------------------------------------

    def addr(self, block, word):
        """The NIC word address of word ``word`` of ``block`` (one of :data:`NIC_BLOCKS`)."""
        pick(self.name, "block", block, dict.fromkeys(NIC_BLOCKS))
        base, width = regmap.nic_block(block)
        if not 0 <= word < 1 << width:
            raise DriverError(f"{self.name}: address {word:#x} does not fit block {block} "
                              f"({width} bits)")
        return base + word

    def _qp(self, q):
        return check_index(self.name, "QP", q, self.n_qps, "n_qps")

    def _plane(self, plane):
        return check_index(self.name, "plane", plane, self.n_planes, "n_planes")

    def _psn(self, what, psn):
        return check_int(self.name, what, psn, 0, PSN_MODULUS - 1)

    def _qp_words(self):
        return (self.n_qps + 31) // 32

    def _mask(self, mask):
        return check_int(self.name, "QP mask", mask, 0, (1 << self.n_qps) - 1)

    @operation
    def read(self, block, word):
        """Word ``word`` of ``block``'s own map (the escape hatch below the named operations)."""
        return (yield READ, self.addr(block, word))

    @operation
    def write(self, block, word, value):
        """Write ``value`` (32 bits) to word ``word`` of ``block``'s own map."""
        value = check_int(self.name, f"{block} word {word:#x}", value, 0, MASK32)
        yield WRITE, self.addr(block, word), value

    # --- own addresses, MACs, T0 (docs/protocol.md 1.2, 3) --------------------------------------

    @operation
    def set_own(self, host, t0=None, block=None):
        """Path building's own host id, then its T0 index (and its locator block)."""
        yield WRITE, self.addr("tx_path", path_map.ADDR_OWN_HOST), check_int(
            self.name, "own host id", host, 0, MASK32)
        if t0 is not None:
            yield WRITE, self.addr("tx_path", path_map.ADDR_OWN_T0), check_int(
                self.name, "own T0", t0, 0, (1 << _T0_BITS) - 1)
        if block is not None:
            yield WRITE, self.addr("tx_path", path_map.ADDR_BLOCK), check_int(
                self.name, "locator block", block, 0, MASK32)

    @operation
    def set_port_macs(self, plane, src, next_hop):
        """Plane port ``plane``'s source MAC and next-hop MAC (48 bits each)."""
        self._plane(plane)
        src = check_int(self.name, "source MAC", src, 0, (1 << _MAC_BITS) - 1)
        dst = check_int(self.name, "next-hop MAC", next_hop, 0, (1 << _MAC_BITS) - 1)
        for word, value in enumerate((src & MASK32, src >> 32, dst & MASK32, dst >> 32)):
            yield WRITE, self.addr("tx_path", path_map.port_addr(plane, word)), value

    @operation
    def set_inner_address(self, address):
        """The NIC's inner IPv6 address (the destination of every frame it accepts,
        docs/protocol.md 1.2), low word first."""
        address = check_int(self.name, "inner address", address, 0, (1 << 128) - 1)
        for i in range(4):
            yield WRITE, self.addr("rx_front", front_map.ADDR_INNER_DST + i), \
                address >> (32 * i) & MASK32

    @operation
    def set_spray(self, ev_min_active=None, num_t1=None):
        """The scheduler's floor of active EVs and its number of T1s (docs/protocol.md 4.2)."""
        if ev_min_active is not None:
            yield WRITE, self.addr("spray", spray_map.ADDR_EV_MIN_ACTIVE), check_int(
                self.name, "ev_min_active", ev_min_active, 0, 0xFFFF)
        if num_t1 is not None:
            yield WRITE, self.addr("spray", spray_map.ADDR_NUM_T1), check_int(
                self.name, "number of T1s", num_t1, 0, 256)

    # --- planes (docs/protocol.md 4.6) -------------------------------------------------------

    @operation
    def set_planes_up(self, mask):
        """The plane up mask, bit p = plane p, in the scheduler (which planes it sprays on) and
        the plane splitter (a plane not up is flushed). The ``plane_down`` inputs are wires,
        not registers; :meth:`plane_state` shows their effect."""
        mask = check_int(self.name, "plane mask", mask, 0, (1 << self.n_planes) - 1)
        yield WRITE, self.addr("spray", spray_map.ADDR_PLANE_UP), mask
        yield WRITE, self.addr("plane_splitter", split_map.ADDR_PLANE_UP), mask

    @operation
    def set_plane(self, plane, up):
        """Plane ``plane`` up or down in both masks, the others as they are."""
        bit = 1 << self._plane(plane)
        mask = yield READ, self.addr("plane_splitter", split_map.ADDR_PLANE_UP)
        yield from self.set_planes_up.steps(mask | bit if up else mask & ~bit)

    @operation
    def plane_state(self):
        """``dict(spray_mask, splitter_mask, up)``: the two configured masks and the planes up
        (the splitter's mask and not ``plane_down``)."""
        return dict(spray_mask=(yield READ, self.addr("spray", spray_map.ADDR_PLANE_UP)),
                    splitter_mask=(yield READ, self.addr("plane_splitter",
                                                          split_map.ADDR_PLANE_UP)),
                    up=(yield READ, self.addr("plane_splitter", split_map.ADDR_STATUS)))

    # --- QPs: transmit side ------------------------------------------------------------------

    @operation
    def reset_tx_qp(self, q, start_psn, enable=True):
        """The segmenter's context of QP ``q``: a write resets the QP (held requests dropped,
        next PSN = PSN limit = ``start_psn``); write it while the QP is quiet."""
        self._qp(q)
        psn = self._psn("start PSN", start_psn)
        yield WRITE, self.addr("segmenter", seg_map.QP_CONTEXT + q), \
            (_SEG_ENABLE if enable else 0) | psn

    @operation
    def set_peer(self, q, peer_qpn, peer_host, peer_t0, peer_port):
        """Path building's context of QP ``q``: the peer's QPN, host id and its T0 and port
        there (the path down to it, docs/protocol.md 3)."""
        self._qp(q)
        peer_qpn = check_int(self.name, "peer QPN", peer_qpn, 0, (1 << 24) - 1)
        peer_host = check_int(self.name, "peer host", peer_host, 0, MASK32)
        peer_t0 = check_int(self.name, "peer T0", peer_t0, 0, (1 << _T0_BITS) - 1)
        peer_port = check_int(self.name, "peer port", peer_port, 0, (1 << _T0_BITS) - 1)
        for off, value in ((path_map.OFF_PEER_QPN, peer_qpn), (path_map.OFF_PEER_HOST, peer_host),
                           (path_map.OFF_PEER_PATH, peer_t0 | peer_port << _PORT_SHIFT)):
            yield WRITE, self.addr("tx_path", path_map.qp_addr(q, off)), value

    @operation
    def table_write(self, word, data):
        """A spray scheduler table write (word ``word`` of the scheduler's map) once no earlier
        one waits: status bit ``STATUS_CMD_PENDING`` polled until clear, then the write."""
        status = self.addr("spray", spray_map.ADDR_STATUS)
        while (yield READ, status) & spray_map.STATUS_CMD_PENDING:
            pass
        yield WRITE, self.addr("spray", word), check_int(self.name, "table word", data, 0, MASK32)

    def _page(self, q, plane, offset):
        self._qp(q)
        self._plane(plane)
        return spray_map.table_addr(q, plane, offset)

    def _slot(self, slot):
        return check_index(self.name, "slot", slot, self.p["slots"], "slots")

    def _entry(self, entry):
        return check_index(self.name, "pool entry", entry, self.p["backups"], "backups")

    def _ev(self, ev):
        return check_int(self.name, "EV", ev, 0, (1 << EV_BITS) - 1)

    @operation
    def write_slot_ev(self, q, plane, slot, ev):
        """Slot ``slot`` of (QP ``q``, plane) holds ``ev``, GOOD (docs/protocol.md 4.2)."""
        yield from self.table_write.steps(
            self._page(q, plane, spray_map.OFF_SLOT_EV + self._slot(slot)), self._ev(ev))

    @operation
    def write_slot_state(self, q, plane, slot, state):
        """Set slot ``slot``'s state (a :class:`models.spray.SlotState` or its name), no
        refill."""
        if isinstance(state, str):
            state = pick(self.name, "slot state", state.upper(), SlotState.__members__)
        state = check_int(self.name, "slot state", state, 0, max(SlotState))
        yield from self.table_write.steps(
            self._page(q, plane, spray_map.OFF_SLOT_STATE + self._slot(slot)), state)

    @operation
    def write_pool_ev(self, q, plane, entry, ev):
        """Backup pool entry ``entry`` of (QP ``q``, plane) holds ``ev``."""
        yield from self.table_write.steps(
            self._page(q, plane, spray_map.OFF_POOL_EV + self._entry(entry)), self._ev(ev))

    @operation
    def clear_pool_entry(self, q, plane, entry):
        """Empty backup pool entry ``entry`` of (QP ``q``, plane)."""
        yield from self.table_write.steps(
            self._page(q, plane, spray_map.OFF_POOL_VALID + self._entry(entry)), 0)

    @operation
    def seed_lfsr(self, q, plane, seed):
        """Seed the LFSR of (QP ``q``, plane), 1..0xFFFF (docs/protocol.md 4.3)."""
        seed = check_int(self.name, "LFSR seed", seed, 1, _SEED_MAX)
        yield from self.table_write.steps(self._page(q, plane, spray_map.OFF_LFSR), seed)

    @operation
    def write_ev_set(self, q, evs, seeds, pools):
        """QP ``q``'s EV set (docs/protocol.md 4.2), per plane: the slots' EVs, the backup pool,
        the LFSR seed (the shape :func:`models.fabric_nic.draw_ev_sets` returns)."""
        self._qp(q)
        for name, per_plane in (("EV", evs), ("seed", seeds), ("pool", pools)):
            if len(per_plane) != self.n_planes:
                raise DriverError(f"{self.name}: QP {q}: {len(per_plane)} planes of {name}s "
                                  f"for a NIC of {self.n_planes} planes")
        for plane in range(self.n_planes):
            if len(evs[plane]) > self.p["slots"] or len(pools[plane]) > self.p["backups"]:
                raise DriverError(f"{self.name}: QP {q} plane {plane}: {len(evs[plane])} EVs "
                                  f"and {len(pools[plane])} backups for {self.p['slots']} slots "
                                  f"and {self.p['backups']} pool entries")
            for s, ev in enumerate(evs[plane]):
                yield from self.write_slot_ev.steps(q, plane, s, ev)
            for i, ev in enumerate(pools[plane]):
                yield from self.write_pool_ev.steps(q, plane, i, ev)
            yield from self.seed_lfsr.steps(q, plane, seeds[plane])

    @operation
    def wait_spray_idle(self):
        """Poll the scheduler's status until no table write, event or decision is in flight."""
        status = self.addr("spray", spray_map.ADDR_STATUS)
        while (yield READ, status):
            pass

    @operation
    def enable_tx_qps(self, mask):
        """QP enables of the transmit side: path building's mask, then (the scheduler idle) the
        scheduler's."""
        mask = self._mask(mask)
        for k, word in enumerate(_mask_words(mask, self._qp_words())):
            yield WRITE, self.addr("tx_path", path_map.ADDR_QP_ENABLE + k), word
        yield from self.wait_spray_idle.steps()
        for k, word in enumerate(_mask_words(mask, self._qp_words())):
            yield WRITE, self.addr("spray", spray_map.ADDR_QP_ENABLE + k), word

    # --- QPs: receive side -------------------------------------------------------------------

    @operation
    def enable_rx_qps(self, mask):
        """The receive front's QP enable mask (frames of other QPs are dropped)."""
        mask = self._mask(mask)
        for k, word in enumerate(_mask_words(mask, self._qp_words())):
            yield WRITE, self.addr("rx_front", front_map.ADDR_QP_ENABLE + k), word

    @operation
    def register_region(self, region, rkey, base, length, valid=True):
        """Memory region ``region``: R_Key ``rkey`` -> ``base``, ``length`` bytes
        (docs/protocol.md section 5: a Write lands only inside a valid region of its R_Key)."""
        check_index(self.name, "region", region, self.p["n_regions"], "n_regions")
        values = dict(rkey=check_int(self.name, "R_Key", rkey, 0, MASK32),
                      base=check_int(self.name, "region base", base, 0, (1 << 64) - 1),
                      length=check_int(self.name, "region length", length, 0, (1 << 64) - 1))
        words = dict(rkey=values["rkey"], base_lo=values["base"] & MASK32,
                     base_hi=values["base"] >> 32, length_lo=values["length"] & MASK32,
                     length_hi=values["length"] >> 32, valid=int(bool(valid)))
        for name in front_map.REGION_REGS:
            yield WRITE, self.addr("rx_front", front_map.region_reg(region, name)), words[name]

    @operation
    def invalidate_region(self, region):
        """Memory region ``region`` no longer valid."""
        check_index(self.name, "region", region, self.p["n_regions"], "n_regions")
        yield WRITE, self.addr("rx_front", front_map.region_reg(region, "valid")), 0

    @operation
    def setup_rx_qp(self, q, start_psn, enable=True):
        """The receive tracker's QP ``q``: the peer's start PSN (its sending side), enable."""
        self._qp(q)
        psn = self._psn("peer start PSN", start_psn)
        yield WRITE, self.addr("rx_tracker", tracker_map.qp_addr(q, tracker_map.OFF_CACK)), \
            psn | (tracker_map.SETUP_ENABLE if enable else 0)

    # --- QPs: reliability (docs/protocol.md 4.5) ---------------------------------------------

    @operation
    def set_reliability(self, q, config):
        """QP ``q``'s window, MPR, timeout exponent, retry limit and probe period from a
        :class:`models.reliability.QpConfig` (or a dict of its fields); write them before the
        QP's set-up."""
        self._qp(q)
        for field, off, bits in _RELIABILITY_PARAMS:
            value = config[field] if isinstance(config, dict) else getattr(config, field)
            bits = self.p["timer_bits"] if bits is None else bits
            value = check_int(self.name, f"QP {q} {field}", value, 0, (1 << bits) - 1)
            yield WRITE, self.addr("reliability", rel_map.qp_addr(q, off)), value

    @operation
    def setup_reliability(self, q, start_psn, enable=True):
        """Set QP ``q`` up in the reliability block: start PSN, enable; every state of the QP
        cleared (write it while the block holds no record of the QP)."""
        self._qp(q)
        psn = self._psn("start PSN", start_psn)
        yield WRITE, self.addr("reliability", rel_map.qp_addr(q, rel_map.OFF_SETUP)), \
            psn | (rel_map.SETUP_ENABLE if enable else 0)

    # --- whole QPs ---------------------------------------------------------------------------

    @operation
    def qp_enables(self):
        """The QP enable masks: ``dict(tx_path, spray, rx_front)``."""
        out = {}
        for block, word in (("tx_path", path_map.ADDR_QP_ENABLE),
                            ("spray", spray_map.ADDR_QP_ENABLE),
                            ("rx_front", front_map.ADDR_QP_ENABLE)):
            mask = 0
            for k in range(self._qp_words()):
                mask |= (yield READ, self.addr(block, word + k)) << (32 * k)
            out[block] = mask
        return out

    @operation
    def create_qp(self, q, peer_host, peer_t0, peer_port, start_psn, peer_start_psn, ev_set,
                  qp_config, peer_qpn=None, region=None, region_index=None):
        """Set one QP up in every block and enable it, the other QPs left as they are.

        Parameters
        ----------
        q : int
            The local QPN.
        peer_host, peer_t0, peer_port : int
            The peer's host id, its T0 and its port there.
        start_psn, peer_start_psn : int
            The first PSN this side sends, and the peer's (this side's receive tracker).
        ev_set : tuple
            ``(evs, seeds, pools)`` per plane (:meth:`write_ev_set`).
        qp_config : :class:`models.reliability.QpConfig`
        peer_qpn : int, optional
            The peer's QPN (default ``q``).
        region : tuple, optional
            ``(rkey, base, length)`` of the memory region the peer writes to, registered at
            ``region_index`` (default ``q``).
        """
        self._qp(q)
        evs, seeds, pools = ev_set
        yield from self.reset_tx_qp.steps(q, start_psn)
        yield from self.set_peer.steps(q, q if peer_qpn is None else peer_qpn, peer_host,
                                       peer_t0, peer_port)
        yield from self.write_ev_set.steps(q, evs, seeds, pools)
        enables = yield from self.qp_enables.steps()
        bit = 1 << q
        yield from self.enable_tx_qps.steps(enables["tx_path"] | bit)
        yield from self.enable_rx_qps.steps(enables["rx_front"] | bit)
        if region is not None:
            yield from self.register_region.steps(q if region_index is None else region_index,
                                                  *region)
        yield from self.setup_rx_qp.steps(q, peer_start_psn)
        yield from self.set_reliability.steps(q, qp_config)
        yield from self.setup_reliability.steps(q, start_psn)

    @operation
    def reset_qp(self, q):
        """Disable QP ``q`` everywhere: enable bits cleared, its segmenter context, receive
        tracker and reliability state reset disabled (stop its traffic first)."""
        self._qp(q)
        enables = yield from self.qp_enables.steps()
        bit = 1 << q
        yield from self.enable_tx_qps.steps(enables["tx_path"] & ~bit)
        yield from self.enable_rx_qps.steps(enables["rx_front"] & ~bit)
        yield from self.reset_tx_qp.steps(q, 0, enable=False)
        yield from self.setup_rx_qp.steps(q, 0, enable=False)
        yield from self.setup_reliability.steps(q, 0, enable=False)

    @operation
    def configure(self, topo, host, peers, start_psns, peer_starts, ev_sets, qp_config,
                  on_setup=None, region_bytes=REGION_BYTES):
        """Every block of NIC ``host`` for its QPs, as the model NICs of
        :mod:`models.fabric_nic` are set up.

        Parameters
        ----------
        topo : :class:`models.fabric_topology.Topology`
        host : int
            This NIC's host.
        peers : dict
            ``{qpn: peer host}``: QP q talks to QP q of its peer; the plane ports' next-hop
            MACs are those of the first QP's peer.
        start_psns, peer_starts : dict
            ``{qpn: PSN}`` of this NIC's and the peer's sending side.
        ev_sets : dict
            ``{qpn: (evs, seeds, pools)}`` (:func:`models.fabric_nic.draw_ev_sets`).
        qp_config : :class:`models.reliability.QpConfig`
            Every QP's reliability parameters.
        on_setup : callable, optional
            ``on_setup(q)`` runs after QP q's reliability set-up write (a bench mirrors it on
            its model).
        region_bytes : int
            The length of each QP's region, at :func:`models.fabric_nic.region_base` with
            :func:`models.fabric_nic.region_rkey`.

        Notes
        -----
        The order: own host and T0, the plane ports' MACs, the scheduler's floor and T1 count;
        per QP the segmenter context, the peer context and the EV sets (table writes polling
        the scheduler's status); the transmit QP enables (the scheduler idle first); the
        receive QP enables, the inner address, per QP its region and tracker; per QP the
        reliability parameters, then its set-up.
        """
        qps = sorted(peers)
        if not qps:
            raise DriverError(f"{self.name}: configure needs at least one QP in peers")
        for q in qps:
            self._qp(q)
        for what, table in (("start_psns", start_psns), ("peer_starts", peer_starts),
                            ("ev_sets", ev_sets)):
            missing = [q for q in qps if q not in table]
            if missing:
                raise DriverError(f"{self.name}: configure: {what} has no entry for QPs "
                                  f"{missing}")
        yield from self.set_own.steps(host, topo.t0_of(host))
        for plane in range(self.n_planes):
            yield from self.set_port_macs.steps(plane, port_mac(plane, host),
                                                port_mac(plane, peers[qps[0]]))
        yield from self.set_spray.steps(self.p["ev_min_active"], topo.t1s)
        for q in qps:
            peer = peers[q]
            yield from self.reset_tx_qp.steps(q, start_psns[q])
            yield from self.set_peer.steps(q, q, peer, topo.t0_of(peer), topo.port_of(peer))
            yield from self.write_ev_set.steps(q, *ev_sets[q])
        enable = sum(1 << q for q in qps)
        yield from self.enable_tx_qps.steps(enable)
        yield from self.enable_rx_qps.steps(enable)
        yield from self.set_inner_address.steps(nic_address(host))
        for q in qps:
            yield from self.register_region.steps(q, region_rkey(q), region_base(q),
                                                  region_bytes)
            yield from self.setup_rx_qp.steps(q, peer_starts[q])
        for q in qps:
            yield from self.set_reliability.steps(q, qp_config)
            yield from self.setup_reliability.steps(q, start_psns[q])
            if on_setup is not None:
                on_setup(q)

    # --- counters ------------------------------------------------------------------------------

    def counter_names(self):
        """Every counter's qualified name (``block.name``; per-plane ones take ``plane=``)."""
        return NIC_COUNTERS.names()

    def counter_addr(self, name, plane=None):
        """The NIC word address of counter ``name`` (of ``plane`` for a per-plane one)."""
        block, word, _ = NIC_COUNTERS.word(self.name, name, plane, self.n_planes)
        return self.addr(block, word)

    @operation
    def counter(self, name, plane=None):
        """Counter ``name``: ``block.name`` (``"reliability.send"``) or a name only one block
        has (``"send_retx"``); ``plane`` for the per-plane ones (``"plane_splitter.frames_out"``,
        ``"rx_front.frames"``)."""
        return (yield READ, self.counter_addr(name, plane))

    @operation
    def clear_counter(self, name, plane=None):
        """Clear counter ``name`` (a write clears a counter, docs/registers.md section 2)."""
        yield WRITE, self.counter_addr(name, plane), 0

    @operation
    def counters(self, blocks=None):
        """Every counter of ``blocks`` (default all) as ``{"block.name": value}``, the per-plane
        ones as ``{"block.name[p]": value}``."""
        blocks = NIC_COUNTERS.blocks() if blocks is None else list(blocks)
        for block in blocks:
            pick(self.name, "block with counters", block, dict.fromkeys(NIC_COUNTERS.blocks()))
        out = {}
        for block in blocks:
            for name, word in NIC_COUNTERS.plain.get(block, {}).items():
                out[f"{block}.{name}"] = yield READ, self.addr(block, word)
            names, fn = NIC_COUNTERS.indexed.get(block, ((), None))
            for plane in range(self.n_planes):
                for name in names:
                    out[f"{block}.{name}[{plane}]"] = yield READ, self.addr(block, fn(plane, name))
        return out

    @operation
    def completions(self):
        """Completions counted so far: ``dict(send, recv)`` (sender side, and received Writes
        with Immediate), work requests taken (``wr``) and host EV events (``ev_host``): the
        engine's counters. The completion records themselves leave on ``m_cpl``
        (:func:`completion` reads them)."""
        out = {}
        for key, name in (("send", "cpl_send"), ("recv", "cpl_recv"), ("wr", "wr"),
                          ("ev_host", "ev_host")):
            out[key] = yield READ, self.addr("engine", ENGINE_COUNTERS[name])
        return out

    @operation
    def ev_events(self):
        """The EV events the scheduler took, by kind (``skip``, ``bad``, ``recovered``,
        ``deny``, ``allow``, ``ignored``: its ``ev_*`` counters), and the reliability block's
        EVs ``marked`` ASSUMED_BAD and ``recovered`` by probes (docs/protocol.md 4.4, 4.5)."""
        out = {}
        for name, word in spray_map.ADDR_COUNTERS.items():
            if name.startswith("ev_"):
                out[name[3:]] = yield READ, self.addr("spray", word)
        out["marked"] = yield READ, self.addr("reliability", rel_map.ADDR_COUNTERS["marked"])
        out["probe_recovered"] = yield READ, self.addr("reliability",
                                                       rel_map.ADDR_COUNTERS["recovered"])
        return out

    # --- info and status -----------------------------------------------------------------------

    @operation
    def info(self, block="engine"):
        """The read-only words describing ``block``, decoded: for the engine ``n_planes``,
        ``data_width``, ``n_qps``; for the others their own info words by name."""
        pick(self.name, "block with info words", block, dict.fromkeys(_INFO_BLOCKS))
        if block == "engine":
            f = _fields((yield READ, self.addr("engine", ENGINE_INFO)), _ENGINE_INFO_FIELDS)
            return dict(n_planes=f["n_planes"], data_width=8 * f["data_bytes"], n_qps=f["n_qps"])
        if block == "reliability":
            f = _fields((yield READ, self.addr(block, rel_map.ADDR_INFO)), _REL_INFO_FIELDS)
            return dict(n_qps=f["n_qps"], ring=1 << f["log2_ring"],
                        probe_entries=f["probe_entries"], wr_depth=1 << f["log2_wr_depth"],
                        timer_bits=f["timer_bits"])
        if block == "rx_tracker":
            f = _fields((yield READ, self.addr(block, tracker_map.ADDR_INFO)),
                        _TRACKER_INFO_FIELDS)
            return dict(n_qps=f["n_qps"], mpr=128 * f["mpr_128"], wimm_max=f["wimm_max"])
        out = {}
        for name, word in _INFO_BLOCKS[block].items():
            out[name] = yield READ, self.addr(block, word)
        return out

    @operation
    def ticks(self):
        """The NIC's tick count (docs/protocol.md 4.5: 1.024 us ticks)."""
        return (yield READ, self.addr("engine", ENGINE_TICKS))

    @operation
    def status(self):
        """Every block's busy bits: ``{block: {flag: 0/1}}`` (engine joins, scheduler, receive
        engine, tracker, placement, reliability)."""
        word = yield READ, self.addr("engine", ENGINE_STATUS)
        out = {"engine": _fields(word, _ENGINE_STATUS_FIELDS)}
        word = yield READ, self.addr("spray", spray_map.ADDR_STATUS)
        out["spray"] = dict(cmd_pending=int(bool(word & spray_map.STATUS_CMD_PENDING)),
                            engine_busy=int(bool(word & spray_map.STATUS_ENGINE_BUSY)),
                            pipe_busy=int(bool(word & spray_map.STATUS_PIPE_BUSY)))
        word = yield READ, self.addr("rx_engine", rx_map.ENGINE_STATUS - rx_map.ENGINE_BASE)
        # rtl/rx_engine.py ENGINE_STATUS: bit 0 frames wait for a verdict, bit 1 m_ctrl valid
        out["rx_engine"] = dict(pending=word & 1, ctrl=word >> 1 & 1)
        for block, addr in (("rx_tracker", tracker_map.ADDR_STATUS),
                            ("placement", placement_map.INFO["status"]),
                            ("reliability", rel_map.ADDR_STATUS)):
            out[block] = dict(busy=(yield READ, self.addr(block, addr)) & 1)
        return out

    @operation
    def status_words(self):
        """The raw status words of the engine, the reliability block and the scheduler."""
        return [(yield READ, self.addr("engine", ENGINE_STATUS)),
                (yield READ, self.addr("reliability", rel_map.ADDR_STATUS)),
                (yield READ, self.addr("spray", spray_map.ADDR_STATUS))]

    @operation
    def busy(self):
        """True while any block holds work (:meth:`status`)."""
        status = yield from self.status.steps()
        return any(v for flags in status.values() for v in flags.values())

    @operation
    def qp_status(self, q):
        """QP ``q`` as its blocks see it: ``tx`` (segmenter: next PSN, PSN limit, oldest PSN,
        requests held / unsent, a retransmission waiting), ``reliability`` (cack PSN, error,
        enable, next PSN, window, pending work requests), ``rx`` (tracker: cack PSN, enable)."""
        self._qp(q)
        tx = {}
        for name, off in seg_map.QP_STATUS_WORDS.items():
            tx[name] = yield READ, self.addr("segmenter", seg_map.QP_STATUS + 4 * q + off)
        tx.update(_fields(tx.pop("counts"), _SEG_COUNTS_FIELDS))
        rel = _fields((yield READ, self.addr("reliability", rel_map.qp_addr(q, rel_map.OFF_SETUP))),
                      _REL_SETUP_FIELDS)
        rel["next_psn"] = yield READ, self.addr("reliability", rel_map.qp_addr(q, rel_map.OFF_NEXT))
        rel.update(_fields((yield READ, self.addr("reliability",
                                                   rel_map.qp_addr(q, rel_map.OFF_INFO))),
                           _REL_QP_INFO_FIELDS))
        rx = _fields((yield READ, self.addr("rx_tracker",
                                             tracker_map.qp_addr(q, tracker_map.OFF_CACK))),
                     _TRACKER_CACK_FIELDS)
        return dict(tx=tx, reliability=rel, rx=rx)

    @operation
    def qp_in_error(self, q):
        """True when QP ``q`` is in the error state (its retry limit exceeded)."""
        self._qp(q)
        word = yield READ, self.addr("reliability", rel_map.qp_addr(q, rel_map.OFF_SETUP))
        return bool(_fields(word, _REL_SETUP_FIELDS)["error"])

    # --- EV table read-back (docs/protocol.md 4.2) -------------------------------------------

    @operation
    def slot_states(self, q, plane):
        """The state of every slot of (QP ``q``, plane), as :class:`models.spray.SlotState`."""
        out = []
        for s in range(self.p["slots"]):
            out.append(SlotState((yield READ, self.addr(
                "spray", self._page(q, plane, spray_map.OFF_SLOT_STATE + s))) & 3))
        return out

    @operation
    def ev_table(self, q, plane):
        """The table page of (QP ``q``, plane) read back: ``slots`` (EVs), ``states``,
        ``pool`` (EVs, None where empty), ``pointer``, ``lfsr``, ``plane_pointer``."""
        page = lambda off: self.addr("spray", self._page(q, plane, off))  # noqa: E731
        slots = []
        for s in range(self.p["slots"]):
            slots.append((yield READ, page(spray_map.OFF_SLOT_EV + s)))
        states = yield from self.slot_states.steps(q, plane)
        pool = []
        for i in range(self.p["backups"]):
            ev = yield READ, page(spray_map.OFF_POOL_EV + i)
            valid = (yield READ, page(spray_map.OFF_POOL_VALID + i)) & 1
            pool.append(ev if valid else None)
        return dict(slots=slots, states=states, pool=pool,
                    pointer=(yield READ, page(spray_map.OFF_POINTER)),
                    lfsr=(yield READ, page(spray_map.OFF_LFSR)),
                    plane_pointer=(yield READ, page(spray_map.OFF_PLANE_POINTER)))

    @operation
    def probes(self):
        """The reliability block's probe list (docs/protocol.md 4.5): one dict per valid entry
        (``entry``, ``qpn``, ``ev``, ``probe_id``, ``outstanding``, ``clean``)."""
        out = []
        for e in range(self.p["probe_entries"]):
            f = _fields((yield READ, self.addr("reliability", rel_map.probe_addr(e, 0))),
                        _PROBE_FIELDS)
            if f.pop("valid"):
                f["ev"] = yield READ, self.addr("reliability", rel_map.probe_addr(e, 1))
                out.append(dict(entry=e, **f))
        return out

    # --- records (no register path) ------------------------------------------------------------

    def work_request(self, qpn, local_addr, remote_va, rkey, length, imm=None, req_id=0):
        """:func:`work_request` with the QP checked against this NIC."""
        return work_request(self._qp(qpn), local_addr, remote_va, rkey, length, imm, req_id)

    def ev_event(self, qpn, ev, kind):
        """:func:`ev_event` with the QP checked against this NIC."""
        return ev_event(self._qp(qpn), self._ev(ev), kind)


_INFO_BLOCKS = {
    "engine": None, "reliability": None, "rx_tracker": None,
    "tx_path": path_map.ADDR_INFO,
    "segmenter": seg_map.INFO,
    "header_inserter": inserter_map.INFO,
    "plane_splitter": split_map.ADDR_INFO,
    "rx_front": front_map.ADDR_INFO,
    "placement": placement_map.INFO,
    "rx_engine": {"core_width": rx_map.ENGINE_INFO - rx_map.ENGINE_BASE},
}


def table_write(cfg, word, data):
    """A spray scheduler table write through ``cfg`` (:meth:`Nic.table_write`). The transmit
    engine's map sits at the NIC's base, so ``cfg`` may be the NIC's port or a bare transmit
    engine's (``tb/test_tx_engine.py``)."""
    return Nic(cfg).table_write(word, data)
