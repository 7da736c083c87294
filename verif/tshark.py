# SPDX-License-Identifier: BSD-2-Clause
"""tshark (Debian's Wireshark 4.0 command line) as an independent reader of the project's pcapng
captures: its fields of every frame, with MRC's UDP port read as RoCE.

``TSHARK_ROCE`` are the options every reading uses. Wireshark picks the dissector of the lower UDP
port first: an EV whose bits 31:16 (the UDP source port, docs/protocol.md 1.3) name a port below
4791 that Wireshark knows (IAX2's 4569, DNS's 53, ...) would be dissected as that protocol, so
every lower port is decoded as InfiniBand, which reads each frame as RoCE. And
``udp.ignore_ipv6_zero_checksum`` is on: MRC frames carry UDP checksum 0 over IPv6 (1.3), which
RFC 6935 allows and Wireshark otherwise flags.
"""

import subprocess

from models.layouts import ROCE_UDP_PORT

__all__ = ["TSHARK_ROCE", "NO_TSHARK", "tshark_fields"]

TSHARK_ROCE = ["-d", f"udp.port==1-{ROCE_UDP_PORT - 1},infiniband",
               "-o", "udp.ignore_ipv6_zero_checksum:TRUE"]
NO_TSHARK = "tshark is not installed (DEBIAN_FRONTEND=noninteractive apt-get install -y tshark)"


def tshark_fields(path, *fields, display_filter=None, roce=True):
    """tshark's fields of every frame of capture ``path`` (one list of strings per frame)."""
    cmd = ["tshark", "-n", "-r", str(path), *(TSHARK_ROCE if roce else []), "-T", "fields"]
    for name in fields:
        cmd += ["-e", name]
    if display_filter:
        cmd += ["-Y", display_filter]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]
