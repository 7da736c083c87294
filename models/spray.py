# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the per-QP EV table and the spray choice (docs/protocol.md sections 4.1-4.6).

The RTL spray scheduler and EV table are compared with this model decision by decision, so every
decision is a pure function of (state, inputs): the state of one QP is an immutable :class:`QpSet`
(one :class:`PlaneSet` per plane), and :func:`choose`, :func:`skip`, :func:`mark_bad`,
:func:`recovered`, :func:`deny`, :func:`allow` and :func:`refill` return a new state without
touching the old one. The inputs that depend on timing are explicit arguments: ``plane_ok`` (planes
up and with room in their port FIFO, a sequence of bools or a bit mask, bit p = plane p) and
``avoid_ev`` (the EV a retransmission must not use, or ``None``). :class:`EvTable` holds the states
of one NIC's QPs, the plane up/down flags and the parameters, validates configuration loads as the
hardware does, and calls the pure functions.

State per QP and plane (docs/protocol.md 4.2, 4.3): A active slots (EV and state), a backup pool of B
entries, the rotation pointer and the 16-bit Galois LFSR (taps 0xB400, shift right); the mask is
always the low log2(A) bits of the LFSR, so it starts as the seed's low bits. Per QP: the plane
round-robin pointer. All pointers start at 0.

Choice (4.3, reproduced by vectors/spray.json and vectors/spray-v2.json): planes are visited from the QP's plane pointer, the
first that is ok and holds a visible choosable slot (GOOD or SKIP, not holding ``avoid_ev``) is
used, and the plane pointer moves to the plane after it. Inside the plane, rotation position r
visits slot r XOR mask, from the plane's pointer onwards over all A positions; the first visible
GOOD slot is chosen and every visible SKIP slot before it becomes GOOD; with no visible GOOD slot,
every visible SKIP slot becomes GOOD and the first is chosen. The pointer becomes
(chosen position + 1) mod A, and when it is not greater than the old pointer the LFSR steps once.
An invisible slot is not chosen, its state does not change and it is not counted. With nothing
choosable the state is unchanged (the packet waits).

**Two profiles** (``profile`` of :func:`choose` and :class:`EvTable`, 2 by default). Profile 2
(vectors/spray-v2.json): a retransmission avoids the whole path (plane, j) of the copy it
replaces: every slot on that path is invisible; if that leaves nothing choosable on the planes
of ``plane_ok``, only the slot(s) holding the copy's EV are; if that too leaves nothing, none is
(:func:`avoidance_levels`); :class:`EvTable` refuses ``ev_min_active`` > N x A; and
:func:`serve_qp` holds retransmissions to the window room as well. Profile 1
(vectors/spray.json; what ``rtl/spray_scheduler.py`` does today, :class:`EvTableV1`): only the
slot(s) holding the avoided EV are invisible, with no fallback, and a retransmission needs no
window room.

Feedback (4.4), keyed by (QP, EV): an event whose EV no active slot of the QP holds is ignored,
except RECOVERED (whose EV normally left the slots when it was replaced); so is an event for a QP
that is not configured.

Profile choices made here where the profile leaves room (the vectors do not cover section 4.4):

- An event acts on every slot of the QP that holds the EV (EVs are normally distinct; nothing
  refuses a duplicate load, and this keeps the rule per slot, as a parallel compare in hardware
  would).
- SKIP: GOOD -> SKIP; a slot in any other state is unchanged.
- BAD (timeout): the GOOD and SKIP slots of the EV's plane whose T1 index equals the EV's are marked
  ASSUMED_BAD (DENIED and ASSUMED_BAD slots stay). The refill then runs, and the QP's choosable
  slots (GOOD or SKIP, over all planes, whether the plane is up or not) are counted. The marking is
  refused as a whole (nothing changes, nothing is reported) when that count is below
  ``ev_min_active`` and below the count before the event: a marking fully made up by the refill is
  allowed even when the QP was already below the floor. The EVs reported are those the marked slots
  held, in slot order. Under one T0 the controller loads j = 0 everywhere, so a path is a plane.
- Backup pool: B fixed entries, each empty or one EV. The refill gives the lowest-numbered waiting
  slot (ASSUMED_BAD or DENIED) the EV of the lowest-numbered pool entry whose path holds no
  ASSUMED_BAD slot of the QP, empties that entry, and repeats until no waiting slot or no such entry
  is left (a refilled slot may free a path for another). It runs after every event and every
  configuration write except :meth:`EvTable.set_state`, which writes a state directly as the
  vectors' ``set_state`` does (no refill, no floor).
- RECOVERED(QP, EV): the EV goes into the lowest empty entry of its plane's pool, unless an active
  slot of the QP still holds it (no backup replaced it yet): then an ASSUMED_BAD slot holding it
  becomes GOOD in place (returning it to the pool would leave it barred by its own slot), and a slot
  holding it in another state is left alone (a DENIED EV stays out). An EV already in the pool, an
  EV whose plane is not below N or whose T1 index is not below the number of T1s, or an EV arriving
  at a full pool is ignored.
- DENY: the slots holding the EV become DENIED (from any state), then the refill runs. ALLOW: a
  DENIED slot holding the EV becomes GOOD; once a backup replaced it, ALLOW is ignored (4.4).
- Plane up/down (4.6) changes no EV state: a down plane is simply not ok. :meth:`EvTable.plane_ok`
  gives the plane_ok of a choice (up and room).
- QP round-robin (:func:`serve_qp`): profile 2, a QP is eligible when its window has room and it
  has a retransmission waiting or a new packet; profile 1, when it has a retransmission waiting
  (it needs no window room: its PSN is already outstanding) or a new packet and window room; the
  pointer moves to the QP after the one served; inside a QP the retransmission goes first. A caller that must skip
  a QP whose retransmission has nothing choosable folds :meth:`EvTable.can_choose` into the flags.
- Configuration loads are refused (ValueError) as the hardware refuses them: an EV whose plane field
  is not the plane of the set it is loaded into (so also not below N), a T1 index not below the
  configured number of T1s, a zero or over-wide LFSR seed.

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass, replace
from enum import IntEnum
from typing import NamedTuple

from .layouts import NackReason, Opcode, SackVerdict
from .records import EvEvent

__all__ = [
    "SlotState", "PlaneSet", "QpSet", "Choice", "Serve", "EvTable",
    "make_ev", "ev_plane", "ev_t1", "ev_path", "lfsr_step", "plane_ok_list",
    "choose", "choose_in_plane", "choosable_anywhere", "avoidance_levels", "EvTableV1", "refill", "skip", "mark_bad", "recovered", "deny", "allow",
    "feedback_skips", "serve_qp", "window_room", "ev_marked_records",
    "EV_PLANE_BITS", "EV_T1_SHIFT", "EV_T1_BITS", "EV_SALT_SHIFT", "EV_SALT_BITS",
    "MAX_PLANES", "MAX_T1", "MAX_SLOTS", "LFSR_TAPS",
    "DEFAULT_SLOTS", "DEFAULT_BACKUP", "DEFAULT_EV_MIN_ACTIVE", "DEFAULT_W_MAX", "DEFAULT_MPR",
]

# EV layout (docs/protocol.md 4.1): EV[3:0] plane, EV[11:4] T1 index j, EV[31:12] salt.
EV_PLANE_BITS = 4
EV_T1_SHIFT = 4
EV_T1_BITS = 8
EV_SALT_SHIFT = 12
EV_SALT_BITS = 20
EV_BITS = 32

MAX_PLANES = 1 << EV_PLANE_BITS      # 16
MAX_T1 = 1 << EV_T1_BITS             # 256
MAX_SLOTS = 256                      # SEND_RECORD.slot is 8 bits
LFSR_TAPS = 0xB400                   # x^16 + x^14 + x^13 + x^11 + 1, shift right
LFSR_BITS = 16

DEFAULT_SLOTS = 16                   # A
DEFAULT_BACKUP = 8                   # B
DEFAULT_EV_MIN_ACTIVE = 4
DEFAULT_W_MAX = 64
DEFAULT_MPR = 1024


class SlotState(IntEnum):
    """State of one active slot (docs/protocol.md 4.2); the value is the 2-bit hardware encoding."""
    GOOD = 0
    SKIP = 1
    ASSUMED_BAD = 2
    DENIED = 3

    @property
    def letter(self):
        """One letter per state, as in vectors/spray.json: G, S, A, D."""
        return "GSAD"[self]

    @property
    def choosable(self):
        return self in (SlotState.GOOD, SlotState.SKIP)

    @property
    def waiting(self):
        """True when the slot waits for a backup EV (ASSUMED_BAD or DENIED)."""
        return not self.choosable


# --- EVs and the LFSR -----------------------------------------------------------------------------

def make_ev(plane, t1, salt=0):
    """The EV of (plane, T1 index j, salt), docs/protocol.md 4.1."""
    if not 0 <= plane < MAX_PLANES or not 0 <= t1 < MAX_T1 or not 0 <= salt < 1 << EV_SALT_BITS:
        raise ValueError(f"EV fields out of range: plane {plane}, t1 {t1}, salt {salt}")
    return plane | t1 << EV_T1_SHIFT | salt << EV_SALT_SHIFT


def ev_plane(ev):
    return ev & (MAX_PLANES - 1)


def ev_t1(ev):
    return (ev >> EV_T1_SHIFT) & (MAX_T1 - 1)


def ev_path(ev):
    """The path (plane, j) of an EV: EVs that differ only in salt share it."""
    return ev_plane(ev), ev_t1(ev)


def lfsr_step(state):
    """One step of the 16-bit Galois LFSR of docs/protocol.md 4.3."""
    lsb = state & 1
    state >>= 1
    if lsb:
        state ^= LFSR_TAPS
    return state


def plane_ok_list(plane_ok, planes):
    """``plane_ok`` as a tuple of bools: a bit mask (bit p = plane p) or a sequence of N bools."""
    if isinstance(plane_ok, int):
        return tuple(bool(plane_ok >> p & 1) for p in range(planes))
    ok = tuple(bool(x) for x in plane_ok)
    if len(ok) != planes:
        raise ValueError(f"plane_ok has {len(ok)} entries for {planes} planes")
    return ok


# --- State ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlaneSet:
    """One QP's EV set on one plane: A slots, the backup pool, the rotation pointer and the LFSR.

    ``evs`` and ``states`` have A entries; ``pool`` has B entries, each an EV or ``None``.
    """
    plane: int
    evs: tuple
    states: tuple
    pool: tuple
    pointer: int
    lfsr: int

    @property
    def size(self):
        return len(self.evs)

    @property
    def mask(self):
        return self.lfsr & (self.size - 1)

    def rotation(self):
        """(position, slot) pairs in search order: A positions from the pointer, slot pos ^ mask."""
        a = self.size
        return [((self.pointer + k) % a, ((self.pointer + k) % a) ^ self.mask) for k in range(a)]

    def visible(self, slot, avoid_ev, avoid_path=None):
        """True when the slot may be chosen: GOOD or SKIP, not holding the avoided EV and (v2)
        not on the avoided path (plane, j)."""
        ev = self.evs[slot]
        return self.states[slot].choosable and ev != avoid_ev and \
            (avoid_path is None or ev_path(ev) != avoid_path)

    def choosable(self, avoid_ev=None, avoid_path=None):
        return any(self.visible(s, avoid_ev, avoid_path) for s in range(self.size))

    def holds(self, ev):
        return ev in self.evs

    def letters(self):
        return "".join(s.letter for s in self.states)


@dataclass(frozen=True)
class QpSet:
    """One QP's EV table state: a :class:`PlaneSet` per plane and the plane round-robin pointer."""
    planes: tuple
    plane_pointer: int = 0

    def with_plane(self, plane_set):
        planes = list(self.planes)
        planes[plane_set.plane] = plane_set
        return replace(self, planes=tuple(planes))

    def choosable_count(self):
        """GOOD and SKIP slots over all planes (the quantity the floor ev_min_active bounds)."""
        return sum(s.choosable for ps in self.planes for s in ps.states)

    def holds(self, ev):
        """True when an active slot of the QP holds ``ev`` (events for other EVs are ignored)."""
        p = ev_plane(ev)
        return p < len(self.planes) and self.planes[p].holds(ev)

    def letters(self):
        return [ps.letters() for ps in self.planes]


class Choice(NamedTuple):
    """One spray decision: the plane, the slot, its EV and the rotation position it was found at."""
    plane: int
    slot: int
    ev: int
    position: int


# --- The choice (4.3) -----------------------------------------------------------------------------

def choose_in_plane(plane_set, avoid_ev=None, avoid_path=None):
    """The choice inside one plane: ``(slot, position, new PlaneSet)``, ``None`` if none visible
    (slots holding ``avoid_ev`` or on the path ``avoid_path`` are invisible)."""
    visible = [(pos, s) for pos, s in plane_set.rotation()
               if plane_set.visible(s, avoid_ev, avoid_path)]
    if not visible:
        return None
    goods = [k for k, (_, s) in enumerate(visible) if plane_set.states[s] == SlotState.GOOD]
    # The SKIP slots passed over become GOOD: those before the first GOOD, or all when none is GOOD.
    pick = goods[0] if goods else 0
    cleared = visible[:pick + 1] if goods else visible
    states = list(plane_set.states)
    for _, s in cleared:
        states[s] = SlotState.GOOD
    position, slot = visible[pick]
    pointer = (position + 1) % plane_set.size
    lfsr = lfsr_step(plane_set.lfsr) if pointer <= plane_set.pointer else plane_set.lfsr
    return slot, position, replace(plane_set, states=tuple(states), pointer=pointer, lfsr=lfsr)


def avoidance_levels(avoid_ev, profile=2):
    """The ``(avoid_ev, avoid_path)`` hidings a retransmission's choice tries in turn
    (docs/protocol.md 4.3). Profile 2: the whole path of the copy replaced, then only the slot
    holding its EV, then nothing. Profile 1: only the EV's slot, no fallback."""
    if avoid_ev is None:
        return ((None, None),)
    if profile == 1:
        return ((avoid_ev, None),)
    return ((None, ev_path(avoid_ev)), (avoid_ev, None), (None, None))


def _choose_hidden(qp, ok, avoid_ev, avoid_path):
    n = len(qp.planes)
    for k in range(n):
        p = (qp.plane_pointer + k) % n
        if not ok[p]:
            continue
        found = choose_in_plane(qp.planes[p], avoid_ev, avoid_path)
        if found is None:
            continue
        slot, position, plane_set = found
        new_qp = replace(qp.with_plane(plane_set), plane_pointer=(p + 1) % n)
        return Choice(p, slot, plane_set.evs[slot], position), new_qp
    return None, qp


def choose(qp, plane_ok, avoid_ev=None, profile=2):
    """One packet's choice for a QP: ``(Choice or None, new QpSet)``.

    ``plane_ok``: planes up with room (bit mask or N bools); ``avoid_ev``: the EV of the copy a
    retransmission replaces, or ``None``; ``profile`` 2 hides that copy's whole path with the
    fallbacks of :func:`avoidance_levels`, 1 only its EV's slot. "Nothing choosable anywhere"
    is judged over the planes of ``plane_ok`` (docs/protocol.md 10, point 4). With nothing
    choosable the state comes back unchanged.
    """
    ok = plane_ok_list(plane_ok, len(qp.planes))
    for hide_ev, hide_path in avoidance_levels(avoid_ev, profile):
        choice, new_qp = _choose_hidden(qp, ok, hide_ev, hide_path)
        if choice is not None:
            return choice, new_qp
    return None, qp


def choosable_anywhere(qp, plane_ok, avoid_ev=None, profile=2):
    """True when :func:`choose` would find a slot with these inputs."""
    ok = plane_ok_list(plane_ok, len(qp.planes))
    return any(ok[p] and ps.choosable(hide_ev, hide_path)
               for hide_ev, hide_path in avoidance_levels(avoid_ev, profile)
               for p, ps in enumerate(qp.planes))


# --- Feedback (4.4) -------------------------------------------------------------------------------

def refill(plane_set):
    """Give waiting slots (ASSUMED_BAD, DENIED) backup EVs whose path holds no ASSUMED_BAD slot.

    Lowest waiting slot first, lowest eligible pool entry first, repeated until one side runs out.
    """
    evs = list(plane_set.evs)
    states = list(plane_set.states)
    pool = list(plane_set.pool)
    while True:
        waiting = [s for s, st in enumerate(states) if st.waiting]
        if not waiting:
            break
        bad_paths = {ev_path(evs[s]) for s, st in enumerate(states) if st == SlotState.ASSUMED_BAD}
        entry = next((i for i, ev in enumerate(pool)
                      if ev is not None and ev_path(ev) not in bad_paths), None)
        if entry is None:
            break
        evs[waiting[0]], states[waiting[0]], pool[entry] = pool[entry], SlotState.GOOD, None
    return replace(plane_set, evs=tuple(evs), states=tuple(states), pool=tuple(pool))


def _set_states(qp, ev, change):
    """Apply ``change(state) -> state`` to every slot holding ``ev``, then refill that plane."""
    if not qp.holds(ev):
        return qp
    ps = qp.planes[ev_plane(ev)]
    states = tuple(change(st) if e == ev else st for e, st in zip(ps.evs, ps.states))
    return qp.with_plane(refill(replace(ps, states=states)))


def skip(qp, ev):
    """SACK with m = SKIP_ONCE or NACK TRIMMED on ``ev``: GOOD -> SKIP."""
    return _set_states(qp, ev, lambda st: SlotState.SKIP if st == SlotState.GOOD else st)


def deny(qp, ev):
    """Controller DENY: the slots holding ``ev`` become DENIED, then the refill runs."""
    return _set_states(qp, ev, lambda st: SlotState.DENIED)


def allow(qp, ev):
    """Controller ALLOW: a DENIED slot still holding ``ev`` becomes GOOD."""
    return _set_states(qp, ev, lambda st: SlotState.GOOD if st == SlotState.DENIED else st)


def mark_bad(qp, ev, ev_min_active=DEFAULT_EV_MIN_ACTIVE):
    """Timeout of a packet sent on ``ev``: ``(EVs marked ASSUMED_BAD, new QpSet)``.

    Marks the GOOD and SKIP slots on the EV's path, refills, and refuses the whole marking (returns
    ``((), qp)``) when it leaves fewer than ``ev_min_active`` choosable slots and fewer than before.
    """
    if not qp.holds(ev):
        return (), qp
    ps = qp.planes[ev_plane(ev)]
    path = ev_path(ev)
    marked = [s for s in range(ps.size) if ev_path(ps.evs[s]) == path and ps.states[s].choosable]
    if not marked:
        return (), qp
    states = list(ps.states)
    for s in marked:
        states[s] = SlotState.ASSUMED_BAD
    new_qp = qp.with_plane(refill(replace(ps, states=tuple(states))))
    after = new_qp.choosable_count()
    if after < ev_min_active and after < qp.choosable_count():
        return (), qp
    return tuple(ps.evs[s] for s in marked), new_qp


def recovered(qp, ev):
    """Probe list: ``ev`` answered cleanly three times; it returns to its plane's backup pool."""
    p = ev_plane(ev)
    if p >= len(qp.planes):
        return qp
    ps = qp.planes[p]
    if ps.holds(ev):
        states = tuple(SlotState.GOOD if e == ev and st == SlotState.ASSUMED_BAD else st
                       for e, st in zip(ps.evs, ps.states))
        return qp.with_plane(refill(replace(ps, states=states)))
    if ev in ps.pool or None not in ps.pool:
        return qp
    pool = list(ps.pool)
    pool[pool.index(None)] = ev
    return qp.with_plane(refill(replace(ps, pool=tuple(pool))))


def feedback_skips(opcode, code):
    """True when a SACK (``code`` = m) or NACK (``code`` = reason) moves its EV's slot to SKIP."""
    if opcode == Opcode.SACK:
        return code == SackVerdict.SKIP_ONCE
    if opcode == Opcode.NACK:
        return code == NackReason.TRIMMED
    return False


def ev_marked_records(qpn, marked):
    """The EV_MARKED records answering a BAD event (models/records.py): one per EV, or one empty."""
    if not marked:
        return [{"qpn": qpn, "ev": 0, "valid": 0, "last": 1}]
    return [{"qpn": qpn, "ev": ev, "valid": 1, "last": int(i == len(marked) - 1)}
            for i, ev in enumerate(marked)]


# --- QP round-robin (4.3, first bullet) -----------------------------------------------------------

class Serve(NamedTuple):
    """The QP served next, and whether it sends a retransmission (else a new packet)."""
    qp: int
    retx: bool


def window_room(outstanding, w_max=DEFAULT_W_MAX, mpr=DEFAULT_MPR):
    """True when a QP with ``outstanding`` PSNs in flight may send a new one (docs/protocol.md 5)."""
    return outstanding < min(w_max, mpr)


def serve_qp(pointer, retx_ready, new_ready, room, profile=2):
    """Round-robin over QPs: ``(Serve or None, new pointer)``.

    Profile 2: QP q is eligible when ``room[q]`` (limit (b): its window has room) and it has a
    retransmission or a new packet ready (``new_ready`` folds limit (a) in). Profile 1: when
    ``retx_ready[q]`` (no room needed), or ``new_ready[q]`` and ``room[q]``. The first eligible
    from ``pointer`` is served (its retransmission first) and the pointer moves past it.
    """
    count = len(retx_ready)
    if len(new_ready) != count or len(room) != count:
        raise ValueError("retx_ready, new_ready and room must have one entry per QP")
    for k in range(count):
        q = (pointer + k) % count
        if profile == 1:
            eligible = retx_ready[q] or (new_ready[q] and room[q])
        else:
            eligible = room[q] and (retx_ready[q] or new_ready[q])
        if eligible:
            return Serve(q, bool(retx_ready[q])), (q + 1) % count
    return None, pointer


# --- The table of one NIC -------------------------------------------------------------------------

class EvTable:
    """The EV sets of one NIC's QPs (docs/protocol.md 4.2-4.6), with configuration checks as in hardware.

    Parameters: ``planes`` N (1..16), ``num_t1`` the configured number of T1s (1..256), ``slots``
    A (a power of two, 1..256, default 16), ``backup`` B (>= 0, default 8), ``ev_min_active`` the
    floor (>= 0, default 4). QPs are keyed by QPN and loaded with :meth:`configure_qp`.
    """

    def __init__(self, planes, num_t1, slots=DEFAULT_SLOTS, backup=DEFAULT_BACKUP,
                 ev_min_active=DEFAULT_EV_MIN_ACTIVE, profile=2):
        if not isinstance(planes, int) or not 1 <= planes <= MAX_PLANES:
            raise ValueError(f"planes must be 1..{MAX_PLANES}, got {planes!r}")
        if not isinstance(num_t1, int) or not 1 <= num_t1 <= MAX_T1:
            raise ValueError(f"num_t1 must be 1..{MAX_T1}, got {num_t1!r}")
        if not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS or slots & (slots - 1):
            raise ValueError(f"slots (A) must be a power of two in 1..{MAX_SLOTS}, got {slots!r}")
        if not isinstance(backup, int) or backup < 0:
            raise ValueError(f"backup (B) must be >= 0, got {backup!r}")
        if not isinstance(ev_min_active, int) or ev_min_active < 0:
            raise ValueError(f"ev_min_active must be >= 0, got {ev_min_active!r}")
        if profile not in (1, 2):
            raise ValueError(f"profile must be 1 or 2, got {profile!r}")
        if profile == 2 and ev_min_active > planes * slots:
            raise ValueError(f"ev_min_active {ev_min_active} > N x A = {planes * slots} "
                             f"(docs/protocol.md 4.3)")
        self.profile = profile
        self.planes = planes
        self.num_t1 = num_t1
        self.slots = slots
        self.backup = backup
        self.ev_min_active = ev_min_active
        self.plane_up = [True] * planes
        self.qps = {}

    # Configuration -------------------------------------------------------------------------------

    def check_ev(self, ev, plane):
        """Refuse (ValueError) an EV the hardware would not load into plane ``plane``'s sets."""
        if not isinstance(ev, int) or not 0 <= ev < 1 << EV_BITS:
            raise ValueError(f"EV must be a 32-bit unsigned integer, got {ev!r}")
        if ev_plane(ev) != plane:
            raise ValueError(f"EV {ev:#010x} has plane {ev_plane(ev)}, loaded into plane {plane}")
        if ev_t1(ev) >= self.num_t1:
            raise ValueError(f"EV {ev:#010x} has T1 index {ev_t1(ev)}, not below {self.num_t1}")

    @staticmethod
    def check_seed(seed):
        if not isinstance(seed, int) or not 0 < seed < 1 << LFSR_BITS:
            raise ValueError(f"LFSR seed must be 1..0xFFFF, got {seed!r}")

    def _check_plane(self, plane):
        if not isinstance(plane, int) or not 0 <= plane < self.planes:
            raise ValueError(f"plane must be 0..{self.planes - 1}, got {plane!r}")

    def configure_qp(self, qpn, evs, seeds, pools=None):
        """Load a QP: ``evs[p]`` the A EVs of plane p (all GOOD), ``seeds[p]`` its LFSR seed,
        ``pools[p]`` up to B backup EVs (the rest of the pool empty). Pointers start at 0."""
        if len(evs) != self.planes or len(seeds) != self.planes:
            raise ValueError(f"evs and seeds need one entry per plane ({self.planes})")
        pools = pools if pools is not None else [()] * self.planes
        if len(pools) != self.planes:
            raise ValueError(f"pools needs one entry per plane ({self.planes})")
        plane_sets = []
        for p in range(self.planes):
            if len(evs[p]) != self.slots:
                raise ValueError(f"plane {p}: {len(evs[p])} EVs for {self.slots} slots")
            if len(pools[p]) > self.backup:
                raise ValueError(
                    f"plane {p}: {len(pools[p])} backup EVs for a pool of {self.backup}")
            for ev in (*evs[p], *pools[p]):
                self.check_ev(ev, p)
            self.check_seed(seeds[p])
            pool = tuple(pools[p]) + (None,) * (self.backup - len(pools[p]))
            plane_sets.append(PlaneSet(p, tuple(evs[p]), (SlotState.GOOD,) * self.slots, pool,
                                       0, seeds[p]))
        self.qps[qpn] = QpSet(tuple(plane_sets))

    def qp(self, qpn):
        """The state of QP ``qpn`` (an immutable :class:`QpSet`)."""
        if qpn not in self.qps:
            raise ValueError(f"QP {qpn} is not configured")
        return self.qps[qpn]

    def load_slot(self, qpn, plane, slot, ev):
        """Configuration write of one active slot: it holds ``ev``, GOOD; then the refill runs."""
        ps = self._plane_set(qpn, plane)
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot must be 0..{self.slots - 1}, got {slot!r}")
        self.check_ev(ev, plane)
        evs = ps.evs[:slot] + (ev,) + ps.evs[slot + 1:]
        states = ps.states[:slot] + (SlotState.GOOD,) + ps.states[slot + 1:]
        self._store(qpn, refill(replace(ps, evs=evs, states=states)))

    def load_pool_entry(self, qpn, plane, index, ev):
        """Configuration write of backup pool entry ``index`` (``ev`` or ``None`` to empty it)."""
        ps = self._plane_set(qpn, plane)
        if not 0 <= index < self.backup:
            raise ValueError(f"pool index must be 0..{self.backup - 1}, got {index!r}")
        if ev is not None:
            self.check_ev(ev, plane)
        pool = ps.pool[:index] + (ev,) + ps.pool[index + 1:]
        self._store(qpn, refill(replace(ps, pool=pool)))

    def load_seed(self, qpn, plane, seed):
        """Configuration write of a plane's LFSR (the mask takes its low bits at once)."""
        ps = self._plane_set(qpn, plane)
        self.check_seed(seed)
        self._store(qpn, replace(ps, lfsr=seed))

    def set_state(self, qpn, plane, slot, state):
        """Write one slot's state directly, as the vectors' ``set_state``: no refill, no floor."""
        ps = self._plane_set(qpn, plane)
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot must be 0..{self.slots - 1}, got {slot!r}")
        states = ps.states[:slot] + (SlotState(state),) + ps.states[slot + 1:]
        self._store(qpn, replace(ps, states=states))

    def _plane_set(self, qpn, plane):
        self._check_plane(plane)
        return self.qp(qpn).planes[plane]

    def _store(self, qpn, plane_set):
        self.qps[qpn] = self.qps[qpn].with_plane(plane_set)

    # Planes (4.6) --------------------------------------------------------------------------------

    def set_plane_up(self, plane, up):
        """A NIC port went up or down; no EV state changes."""
        self._check_plane(plane)
        self.plane_up[plane] = bool(up)

    def plane_ok(self, room):
        """The plane_ok input of a choice: planes up and with room (``room``: mask or N bools)."""
        room = plane_ok_list(room, self.planes)
        return tuple(up and r for up, r in zip(self.plane_up, room))

    # Choice (4.3) --------------------------------------------------------------------------------

    def choose(self, qpn, room, avoid_ev=None):
        """Choose plane and slot for one packet of ``qpn``; ``None`` when it must wait."""
        choice, self.qps[qpn] = choose(self.qp(qpn), self.plane_ok(room), avoid_ev,
                                       self.profile)
        return choice

    def can_choose(self, qpn, room, avoid_ev=None):
        return choosable_anywhere(self.qp(qpn), self.plane_ok(room), avoid_ev, self.profile)

    # Feedback (4.4) ------------------------------------------------------------------------------

    def event(self, qpn, ev, kind):
        """Apply one EV_EVENT (``kind`` from :class:`models.records.EvEvent`).

        Returns the EVs marked ASSUMED_BAD (BAD only; otherwise empty). Events for a QP that is not
        configured are ignored, like events whose EV no slot holds.
        """
        if kind not in (EvEvent.SKIP, EvEvent.BAD, EvEvent.RECOVERED, EvEvent.DENY, EvEvent.ALLOW):
            raise ValueError(f"unknown EV event kind {kind!r}")
        if qpn not in self.qps:
            return ()
        qp = self.qps[qpn]
        marked = ()
        if kind == EvEvent.SKIP:
            qp = skip(qp, ev)
        elif kind == EvEvent.BAD:
            marked, qp = mark_bad(qp, ev, self.ev_min_active)
        elif kind == EvEvent.RECOVERED:
            if ev_t1(ev) < self.num_t1:
                qp = recovered(qp, ev)
        elif kind == EvEvent.DENY:
            qp = deny(qp, ev)
        else:
            qp = allow(qp, ev)
        self.qps[qpn] = qp
        return marked

    def skip(self, qpn, ev):
        self.event(qpn, ev, EvEvent.SKIP)

    def bad(self, qpn, ev):
        """Timeout on ``ev``: the EVs actually marked (for the probe list), possibly none."""
        return self.event(qpn, ev, EvEvent.BAD)

    def recovered(self, qpn, ev):
        self.event(qpn, ev, EvEvent.RECOVERED)

    def deny(self, qpn, ev):
        self.event(qpn, ev, EvEvent.DENY)

    def allow(self, qpn, ev):
        self.event(qpn, ev, EvEvent.ALLOW)

    def letters(self, qpn):
        """Every slot's state, one string of letters per plane (vectors/spray.json format)."""
        return self.qp(qpn).letters()


class EvTableV1(EvTable):
    """:class:`EvTable` with the version-1 choice (``profile`` = 1: a retransmission hides only
    the slot of the EV it avoids, with no fallback; any ``ev_min_active``), the rule
    ``rtl/spray_scheduler.py`` implements today; its cocotb benches build this one."""

    def __init__(self, planes, num_t1, slots=DEFAULT_SLOTS, backup=DEFAULT_BACKUP,
                 ev_min_active=DEFAULT_EV_MIN_ACTIVE):
        super().__init__(planes, num_t1, slots, backup, ev_min_active, profile=1)
