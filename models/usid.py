# SPDX-License-Identifier: BSD-2-Clause
"""SRv6 uSID paths of the MRC profile (docs/protocol.md sections 3, 4.1 and 4.5): the golden model.

A uSID carrier is an IPv6 destination address in the F3216 format of RFC 9800 (NEXT-CSID):
DA[127:96] is the locator block (default ``fd00:0200::/32``), DA[95:80] the active uSID and
DA[79:0] the following uSIDs, 16 bits each, ended by 0x0000. A carrier holds at most six uSIDs.

A uSID (profile choice) is ``plane`` in bits 15..12, ``role`` in bits 11..10 (:class:`Role`: 1 = T0
switch, 2 = T1 switch, 3 = host port; 0 is never used, so no uSID is 0x0000) and ``index`` in bits
9..0 (T0 number, T1 number, or the downlink port on the egress T0).

Contents:

- :func:`encode` / :func:`decode`: one uSID;
- :func:`carrier` / :func:`carrier_usids`: a carrier from uSIDs and back;
- :func:`path_template` / :func:`path_carrier`: the two path templates of section 3
  (``T0(src) | T1(j) | T0(dst) | HOST(port)`` across T1, ``T0 | HOST(port)`` under one T0);
- :func:`ev_path` / :func:`ev_carrier`: the path of an EV (section 4.1: plane = EV[3:0],
  j = EV[11:4]);
- :func:`reverse_carrier`: the carrier of a control packet answering a packet (section 4.5);
- :func:`un_step`: what one switch (uN) does with a destination address and Hop Limit.

Every function checks its arguments and raises ValueError on a value out of range.
Nothing here imports cocotb, Amaranth or scapy.
"""

from ipaddress import IPv6Address
from typing import NamedTuple

__all__ = [
    "Role", "Usid", "Forward", "DEFAULT_BLOCK", "MAX_USIDS", "PLANES", "INDEX_LIMIT", "KEY_BITS",
    "HOP_LIMIT", "NO_ROUTE", "DROP_REASONS", "encode", "decode", "carrier", "carrier_usids",
    "path_template", "path_carrier", "ev_path", "ev_carrier", "reverse_carrier", "active_key",
    "shift", "un_step", "parse_block",
]

DEFAULT_BLOCK = 0xFD000200       # fd00:0200::/32, the locator block of docs/protocol.md section 3
MAX_USIDS = 6                    # 128 bits = 32-bit block + six 16-bit uSIDs
PLANES = 16                      # 4 plane bits
INDEX_LIMIT = 1 << 10            # 10 index bits
USID_BITS = 16
KEY_BITS = 48                    # DA[127:80]: block and active uSID, the exact-match key

# Drop reasons of the uN step (also the names of the switch counters).
HOP_LIMIT = "hop_limit"
NO_ROUTE = "no_route"
DROP_REASONS = (HOP_LIMIT, NO_ROUTE)

_TAIL_BITS = 128 - 32            # DA[95:0]: the uSIDs
_TAIL_MASK = (1 << _TAIL_BITS) - 1


class Role:
    """The role field of a uSID (bits 11..10)."""
    T0 = 1
    T1 = 2
    HOST = 3


_ROLES = (Role.T0, Role.T1, Role.HOST)


class Usid(NamedTuple):
    """A decoded uSID."""
    plane: int
    role: int
    index: int


class Forward(NamedTuple):
    """The result of a uN step that forwards: the new DA, the decremented Hop Limit, the port."""
    da: int
    hop_limit: int
    port: int


def _check_int(name, value, limit):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < limit:
        raise ValueError(f"{name} = {value!r} is not an integer in 0..{limit - 1}")


def parse_block(block):
    """A locator block given as an int or as text (``"fd00:200::"`` or ``"fd00:200::/32"``)."""
    if isinstance(block, str):
        text = block.split("/", 1)[0]
        value = int(IPv6Address(text))
        if value & ((1 << 96) - 1):
            raise ValueError(f"locator block {block!r} has bits set below bit 96")
        return value >> 96
    _check_int("locator block", block, 1 << 32)
    return block


def encode(plane, role, index):
    """The 16-bit uSID of ``plane`` (0..15), ``role`` (a :class:`Role`) and ``index`` (0..1023)."""
    _check_int("plane", plane, PLANES)
    if role not in _ROLES:
        raise ValueError(f"role = {role!r} is not T0 (1), T1 (2) or HOST (3)")
    _check_int("index", index, INDEX_LIMIT)
    return plane << 12 | role << 10 | index


def decode(usid):
    """The :class:`Usid` of a 16-bit uSID; raises ValueError for role 0 (so also for 0x0000)."""
    _check_int("uSID", usid, 1 << USID_BITS)
    role = usid >> 10 & 3
    if role == 0:
        raise ValueError(f"uSID {usid:#06x} has role 0, which is never used")
    return Usid(plane=usid >> 12, role=role, index=usid & (INDEX_LIMIT - 1))


def carrier(usids, block=DEFAULT_BLOCK):
    """The 128-bit carrier (an int) holding ``usids`` (1 to 6 valid uSIDs, the active one first)
    after the 32-bit locator ``block``; the unused 16-bit places are 0x0000 (end of carrier)."""
    usids = tuple(usids)
    if not 1 <= len(usids) <= MAX_USIDS:
        raise ValueError(f"a carrier holds 1 to {MAX_USIDS} uSIDs, not {len(usids)}")
    for usid in usids:
        decode(usid)
    da = parse_block(block)
    for place in range(MAX_USIDS):
        da = da << USID_BITS | (usids[place] if place < len(usids) else 0)
    return da


def carrier_usids(da):
    """``(block, usids)`` of a carrier: the uSIDs up to the end of carrier (0x0000), or up to the
    sixth. Raises ValueError if a non-zero word follows the end of carrier or a uSID has role 0.
    An exhausted carrier (active uSID 0x0000) gives an empty tuple."""
    _check_int("DA", da, 1 << 128)
    words = [da >> (USID_BITS * (MAX_USIDS - 1 - place)) & 0xFFFF for place in range(MAX_USIDS)]
    count = words.index(0) if 0 in words else MAX_USIDS
    if any(words[count:]):
        raise ValueError(f"DA {IPv6Address(da)}: uSIDs follow the end of carrier")
    for usid in words[:count]:
        decode(usid)
    return da >> _TAIL_BITS, tuple(words[:count])


def path_template(plane, t0_src, t1, t0_dst, host_port):
    """The uSIDs of the path (docs/protocol.md section 3), every one on ``plane``.

    Across T1 (``t0_src != t0_dst``): ``T0(t0_src) | T1(t1) | T0(t0_dst) | HOST(host_port)``.
    Under one T0 (``t0_src == t0_dst``): ``T0(t0_src) | HOST(host_port)``; ``t1`` is then ignored
    (but still checked).
    """
    _check_int("T1 index", t1, INDEX_LIMIT)
    if t0_src == t0_dst:
        return (encode(plane, Role.T0, t0_src), encode(plane, Role.HOST, host_port))
    return (encode(plane, Role.T0, t0_src), encode(plane, Role.T1, t1),
            encode(plane, Role.T0, t0_dst), encode(plane, Role.HOST, host_port))


def path_carrier(plane, t0_src, t1, t0_dst, host_port, block=DEFAULT_BLOCK):
    """The carrier of :func:`path_template` after ``block``."""
    return carrier(path_template(plane, t0_src, t1, t0_dst, host_port), block)


def ev_path(ev):
    """``(plane, j)`` of a 32-bit EV (docs/protocol.md 4.1): plane = EV[3:0], T1 index j = EV[11:4]."""
    _check_int("EV", ev, 1 << 32)
    return ev & 0xF, ev >> 4 & 0xFF


def ev_carrier(ev, t0_src, t0_dst, host_port, block=DEFAULT_BLOCK):
    """The carrier of the packets sent on ``ev`` from under ``t0_src`` to ``host_port`` of
    ``t0_dst`` (every uSID on the EV's plane, the T1 uSID the EV's j; j unused under one T0)."""
    plane, j = ev_path(ev)
    return path_carrier(plane, t0_src, j, t0_dst, host_port, block)


def reverse_carrier(ev, own_t0, peer_t0, peer_port, block=DEFAULT_BLOCK):
    """The carrier of a SACK, NACK or probe answer (docs/protocol.md 4.5) sent back to the peer that sent
    a packet on ``ev``: same plane, same T1 and same EV value, from under ``own_t0`` (the T0 above
    the answering NIC) to ``peer_port`` of ``peer_t0``:
    ``T0(own) | T1(j) | T0(peer) | HOST(peer port)``, or ``T0 | HOST(peer port)`` under one T0."""
    return ev_carrier(ev, own_t0, peer_t0, peer_port, block)


def active_key(da):
    """DA[127:80], the block and the active uSID: the 48-bit key of the exact-match table."""
    _check_int("DA", da, 1 << 128)
    return da >> (128 - KEY_BITS)


def shift(da):
    """The uN shift: DA[95:0] <- {DA[79:0], 16'h0000} (the block is kept)."""
    _check_int("DA", da, 1 << 128)
    return (da & ~_TAIL_MASK) | (da << USID_BITS & _TAIL_MASK)


def un_step(da, hop_limit, table, own_usid, own_block=DEFAULT_BLOCK):
    """One switch (uN, docs/protocol.md section 3) handling a packet whose outer IPv6 header has
    destination ``da`` and Hop Limit ``hop_limit`` on arrival.

    ``table`` maps 48-bit keys (block << 16 | uSID) to egress ports; ``own_usid`` and
    ``own_block`` are the switch's own uSID (any 16-bit value) and locator block.

    Returns a :class:`Forward` (new DA, Hop Limit - 1, port) or a drop reason
    (:data:`HOP_LIMIT`, :data:`NO_ROUTE`):

    1. a Hop Limit of 0 or 1 on arrival drops the packet ('hop_limit');
    2. if DA[127:80] equals ``own_block`` and ``own_usid``, DA[95:0] <- {DA[79:0], 16'h0};
    3. DA[127:80] (of the shifted DA, or of the unshifted one when the own uSID is not active)
       is looked up in ``table``; a miss drops the packet ('no_route').

    Precedence: the conformance vectors (vectors/usid.json) give 'hop_limit' for every Hop Limit
    of 1 (their tables hold the route) and 'no_route' for a miss at Hop Limit 64; no vector has
    both. The Hop Limit is checked first because docs/protocol.md section 3 says "on arrival": it is a
    property of the packet as received, decided before the switch consults its table (as an
    IPv6 router discards an expiring packet whatever its route). A packet that both expires and
    has no route therefore counts as 'hop_limit'.
    """
    _check_int("DA", da, 1 << 128)
    _check_int("hop limit", hop_limit, 256)
    _check_int("own uSID", own_usid, 1 << USID_BITS)
    own_block = parse_block(own_block)
    if hop_limit <= 1:
        return HOP_LIMIT
    if active_key(da) == own_block << USID_BITS | own_usid:
        da = shift(da)
    port = table.get(active_key(da))
    if port is None:
        return NO_ROUTE
    return Forward(da=da, hop_limit=hop_limit - 1, port=port)
