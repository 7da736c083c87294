# SPDX-License-Identifier: BSD-2-Clause
"""A small pcapng writer for the frames of a fabric run (model or RTL), pure Python.

One file is one section: a Section Header Block, then an Interface Description Block per
interface (each tapped link direction), each written when :meth:`PcapngWriter.interface`
declares it, then an Enhanced Packet Block per frame. The format is the IETF pcapng draft
(draft-ietf-opsawg-pcapng), written little-endian:

- interfaces are Ethernet (``LINKTYPE_ETHERNET`` = 1), snaplen 0 (no limit), with the options
  ``if_name`` and ``if_tsresol`` = 9: timestamps count nanoseconds of *simulated* time from the
  start of the run (time 0 is 1970-01-01 for a reader that prints dates);
- frames are written as the fabric carries them: from the destination MAC to the last byte of
  the ICRC, **without the Ethernet FCS** (the fabric model never computes one), so captured
  length = original length = the frame's length. Wireshark and tshark read them as a capture
  made without FCS, as Linux captures are.

    with PcapngWriter("plane0.pcapng") as pcap:
        tx = pcap.interface("host0-tx", "host 0 -> T0 0, plane 0")
        pcap.packet(tx, time_ps, frame)

Nothing here imports scapy: the tests read the files back with scapy and tshark.
"""

import struct

__all__ = ["PcapngWriter", "LINKTYPE_ETHERNET", "TSRESOL_NS", "BLOCK_SHB", "BLOCK_IDB",
           "BLOCK_EPB", "BYTE_ORDER_MAGIC"]

BLOCK_SHB = 0x0A0D0D0A           # Section Header Block
BLOCK_IDB = 0x00000001           # Interface Description Block
BLOCK_EPB = 0x00000006           # Enhanced Packet Block
BYTE_ORDER_MAGIC = 0x1A2B3C4D
LINKTYPE_ETHERNET = 1
TSRESOL_NS = 9                   # if_tsresol: 10^-9 s per timestamp unit
SNAPLEN = 0                      # no limit

OPT_ENDOFOPT = 0
OPT_COMMENT = 1
SHB_USERAPPL = 4
IF_NAME = 2
IF_DESCRIPTION = 3
IF_TSRESOL = 9

PS_PER_NS = 1000


def _pad(data):
    """``data`` padded with zeros to a multiple of 4 bytes (every pcapng field ends on one)."""
    return data + bytes(-len(data) % 4)


def _options(options):
    """The options area of a block: ``(code, value bytes)`` pairs, then opt_endofopt; empty
    when there are none."""
    if not options:
        return b""
    out = b"".join(struct.pack("<HH", code, len(value)) + _pad(value)
                   for code, value in options)
    return out + struct.pack("<HH", OPT_ENDOFOPT, 0)


def _block(block_type, body):
    """A block: type, total length, ``body`` (a multiple of 4 bytes), total length again."""
    total = len(body) + 12
    return struct.pack("<II", block_type, total) + body + struct.pack("<I", total)


def _text(value):
    return str(value).encode("utf-8")


class PcapngWriter:
    """Writes one pcapng file at ``path`` (a context manager; :meth:`close` finishes it).

    ``application`` goes in the section's ``shb_userappl`` option, ``comment`` (optional) in
    its ``opt_comment``. :meth:`interface` declares an Ethernet interface and returns its id;
    :meth:`packet` writes one frame seen on it at ``time_ps`` (integer picoseconds of simulated
    time, stored in nanoseconds: the sub-nanosecond part is dropped). ``packets`` counts the
    frames written."""

    def __init__(self, path, application="mrc fabric simulation", comment=None):
        self.path = path
        self.interfaces = []
        self.packets = 0
        self._file = open(path, "wb")
        options = [(SHB_USERAPPL, _text(application))]
        if comment:
            options.append((OPT_COMMENT, _text(comment)))
        body = struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + _options(options)
        self._file.write(_block(BLOCK_SHB, body))

    def interface(self, name, description=None):
        """Declare an Ethernet interface named ``name`` (and ``description``, optional);
        returns its id for :meth:`packet`."""
        if self._file is None:
            raise ValueError(f"{self.path}: the writer is closed")
        options = [(IF_NAME, _text(name)), (IF_TSRESOL, bytes([TSRESOL_NS]))]
        if description:
            options.append((IF_DESCRIPTION, _text(description)))
        body = struct.pack("<HHI", LINKTYPE_ETHERNET, 0, SNAPLEN) + _options(options)
        self._file.write(_block(BLOCK_IDB, body))
        self.interfaces.append(name)
        return len(self.interfaces) - 1

    def packet(self, interface, time_ps, frame):
        """Write ``frame`` (bytes, no FCS) seen on ``interface`` at ``time_ps``."""
        if self._file is None:
            raise ValueError(f"{self.path}: the writer is closed")
        if not 0 <= interface < len(self.interfaces):
            raise ValueError(f"interface {interface} was not declared (ids 0.."
                             f"{len(self.interfaces) - 1})")
        if not isinstance(time_ps, int) or time_ps < 0:
            raise ValueError(f"time_ps must be a non-negative integer, not {time_ps!r}")
        ns = time_ps // PS_PER_NS
        if ns >= 1 << 64:
            raise ValueError(f"time {time_ps} ps does not fit a 64-bit timestamp")
        frame = bytes(frame)
        body = struct.pack("<IIIII", interface, ns >> 32, ns & 0xFFFFFFFF, len(frame),
                           len(frame)) + _pad(frame)
        self._file.write(_block(BLOCK_EPB, body))
        self.packets += 1

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()
