# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The register maps of the tops as data, read from the RTL itself; SystemRDL, and through
PeakRDL a C header, IP-XACT and Markdown.

    python -m rtl.regmap                 # write docs/regs/: <top>.rdl, .h, .xml, .md
    python -m rtl.regmap --check         # exit 1 if docs/regs/ differs from the RTL

**One source.** Every block declares its configuration map through
:class:`rtl.common.config.ConfigMap` (``reg``, ``wide_reg``, ``ro``, ``counter``). :func:`build`
elaborates a top (:data:`TOPS`: the NIC engine, the switch, the link, with the parameters of
``rtl/gen.py``) with :func:`rtl.common.config.collect_maps` open, so it sees every ConfigMap the
RTL decodes, row by row: address, name, access, description, the width and reset value of the
signal behind it, and whether the block acts on writes to a read-only word. Where in the top's
address space each block sits comes from the tops' own composition constants
(``rtl/nic_engine.py`` ``nic_addr``, ``rtl/tx_engine.py`` ``BLOCKS``, ``rtl/rx_engine.py``
``*_BASE``): :data:`NIC_BLOCKS`, which the driver (``verif/driver/``) uses for its addresses too.
A block changed in the RTL changes the generated files at the next run; ``rtl/tests/test_regmap.py``
regenerates them and compares with the committed ones.

Two things the ConfigMap rows do not say are declared here, from the blocks' constants:

- windows that a block decodes by hand into memories (:data:`REGIONS`: the spray scheduler's
  EV table pages, path building's QP contexts);
- the packed fields of some words (:data:`FIELDS`), which the driver decodes with the same
  tables.

**Folding.** Rows that repeat per QP, port, plane, region or route entry (``q0_cack``,
``q1_cack``, ...) with a constant stride become arrays (SystemRDL ``regfile`` or register
arrays), so the C header has structs and the documents stay short; the array sizes are the
parameters' (``n_qps`` = 4 and so on).
"""

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.hdl import Const, Fragment, Signal
from amaranth.hdl._ast import Slice

from rtl.common.config import collect_maps

__all__ = ["Field", "Register", "Array", "Block", "RegMap", "TOPS", "NIC_BLOCKS", "SWITCH_BLOCKS",
           "LINK_BLOCKS", "FIELDS", "REGIONS", "fields", "nic_block", "build", "systemrdl",
           "generate", "check", "OUT", "main"]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "regs"
WORD = 4                       # bytes per configuration word (docs/registers.md section 1)


# --- the model ------------------------------------------------------------------------------

@dataclass
class Field:
    """``width`` bits from bit ``lsb`` of a register."""
    name: str
    lsb: int
    width: int
    doc: str = ""


@dataclass
class Register:
    """One 32-bit word, or ``count`` of them ``stride`` words apart (a register array).

    ``word`` is block-local (inside an :class:`Array` element: the offset in the element).
    ``access``: ``rw``, ``ro`` or ``counter`` (32 bits, wraps, cleared by any write);
    ``write_action``: a read-only word the block also acts on when written (a set-up word, an
    LFSR seed). ``rows`` are the ConfigMap row names it came from."""
    name: str
    word: int
    access: str
    width: int
    reset: int = 0
    doc: str = ""
    fields: list = field(default_factory=list)
    write_action: bool = False
    count: int = 1
    stride: int = 1
    rows: list = field(default_factory=list)


@dataclass
class Array:
    """``count`` elements ``stride`` words apart from ``word``, each holding ``members``
    (:class:`Register` or :class:`Array`, at offsets within the element)."""
    name: str
    word: int
    count: int
    stride: int
    members: list
    doc: str = ""


@dataclass
class Block:
    """One block's map: its name (the driver's), its place in the elaborated hierarchy, its
    first word in the top's map and its address width."""
    name: str
    path: str
    base: int
    addr_width: int
    doc: str
    items: list


@dataclass
class RegMap:
    top: str
    params: dict
    doc: str
    blocks: list

    def block(self, name):
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"{self.top} has no block {name!r}")

    def words(self):
        """Every word of the map: ``{top word address: (block, dotted name, Register)}``, an
        array element's members named ``array[i].member``."""
        out = {}

        def walk(block, items, base, prefix):
            for item in items:
                if isinstance(item, Array):
                    for i in range(item.count):
                        walk(block, item.members, base + item.word + i * item.stride,
                             f"{prefix}{item.name}[{i}].")
                else:
                    for i in range(item.count):
                        name = f"{prefix}{item.name}" + (f"[{i}]" if item.count > 1 else "")
                        addr = base + item.word + i * item.stride
                        if addr in out:
                            raise ValueError(f"{self.top}: word {addr:#x} is both "
                                             f"{out[addr][1]} and {name}")
                        out[addr] = (block.name, name, item)
        for b in self.blocks:
            walk(b, b.items, b.base, "")
        return out


# --- where each block sits (the tops' composition constants) ---------------------------------

def _nic_blocks():
    from rtl import placement, reliability, rx_engine, rx_front, rx_tracker, tx_engine
    from rtl.nic_engine import BLOCKS, nic_addr
    page = rx_engine.TRACKER_BASE - rx_engine.FRONT_BASE
    out = {}
    for name, (_, width) in tx_engine.BLOCKS.items():
        out[name] = (f"tx.{name}", nic_addr("tx", tx_engine.engine_addr(name, 0)), width)
    for name, path, base, width in (
            ("rx_front", "rx.front", rx_engine.FRONT_BASE, rx_front.ADDR_WIDTH),
            ("rx_tracker", "rx.tracker", rx_engine.TRACKER_BASE, rx_tracker.ADDR_WIDTH),
            ("placement", "rx.placement", rx_engine.PLACEMENT_BASE, placement.ADDR_WIDTH),
            ("rx_engine", "rx", rx_engine.ENGINE_BASE, page.bit_length() - 1)):
        out[name] = (path, nic_addr("rx", base), width)
    out["reliability"] = ("reliability", nic_addr("reliability", 0), reliability.ADDR_WIDTH)
    out["engine"] = ("", nic_addr("engine", 0), BLOCKS["engine"][1])
    return out


# block name -> (path of its ConfigMap's module in the elaborated top, first word, address bits
# [, the ConfigMap address of the block's word 0 when its rows do not start at 0])
NIC_BLOCKS = _nic_blocks()
# The switch's own rows sit at word 0x8000 up of its map (below it: the uN stage's).
SWITCH_BLOCKS = {"un_stage": ("un", 0, 15), "ports": ("", 0x8000, 16, 0x8000)}
LINK_BLOCKS = {"link": ("", 0, None)}


def nic_block(block):
    """``(first word in the NIC's map, address bits)`` of a NIC block (a key of NIC_BLOCKS)."""
    _, base, width = NIC_BLOCKS[block][:3]
    return base, width


def _top_params():
    from rtl.gen import TOPS as GEN
    return GEN


# top -> (module, class, generator entry (rtl/gen.py TOPS), blocks, description)
TOPS = {
    "nic_engine": ("rtl.nic_engine", "NicEngine", NIC_BLOCKS,
                   "MRC NIC engine: transmit engine, receive engine, reliability, engine words"),
    "switch": ("rtl.switch", "Switch", SWITCH_BLOCKS,
               "MRC trimming switch: the uN stage and the ports"),
    "link": ("rtl.link", "Link", LINK_BLOCKS, "Fault-injectable link of the RTL fabric"),
}

_BLOCK_DOCS = {
    "spray": "EV table and spray scheduler (rtl/spray_scheduler.py)",
    "segmenter": "Segmenter (rtl/segmenter.py)", "tx_path": "Path building (rtl/tx_path.py)",
    "header_inserter": "Header inserter (rtl/header_inserter.py)",
    "plane_splitter": "Plane splitter (rtl/plane_splitter.py)",
    "rx_front": "Receive front (rtl/rx_front.py)", "rx_tracker": "Receive tracker (rtl/rx_tracker.py)",
    "placement": "Direct placement (rtl/placement.py)",
    "rx_engine": "Receive engine's own words (rtl/rx_engine.py)",
    "reliability": "Sender reliability (rtl/reliability.py)",
    "engine": "NIC engine's own words (rtl/nic_engine.py)",
    "un_stage": "uN shift-and-forward stage (rtl/un_stage.py)",
    "ports": "Switch ports and sizes (rtl/switch.py)", "link": "Link (rtl/link.py)",
}


# --- what the rows do not say ---------------------------------------------------------------

# Packed fields: (block, register) -> ((field, lowest bit, width), ...); an array member is
# named "array.member". The driver decodes these words with the same tables.
FIELDS = {
    ("engine", "info"): (("n_planes", 0, 4), ("data_bytes", 8, 8), ("n_qps", 16, 16)),
    ("engine", "status"): (("fork", 0, 1), ("ev_merge", 1, 1), ("ctrl_merge", 2, 1),
                           ("cpl_merge", 3, 1)),
    ("reliability", "info"): (("n_qps", 0, 8), ("log2_ring", 8, 4), ("probe_entries", 12, 8),
                              ("log2_wr_depth", 20, 4), ("timer_bits", 24, 5)),
    ("reliability", "qp.cack"): (("cack_psn", 0, 24), ("error", 30, 1), ("enable", 31, 1)),
    ("reliability", "qp.info"): (("window", 0, 16), ("pending_wrs", 16, 16)),
    ("reliability", "probe_entry.state"): (("valid", 0, 1), ("outstanding", 1, 1), ("clean", 2, 2),
                                     ("qpn", 8, 8), ("probe_id", 16, 16)),
    ("rx_tracker", "info"): (("n_qps", 0, 8), ("mpr_128", 8, 8), ("wimm_max", 16, 8)),
    ("rx_tracker", "qp.cack"): (("cack_psn", 0, 24), ("enable", 31, 1)),
    ("segmenter", "qp.counts"): (("held", 0, 8), ("unsent", 8, 8), ("retx_waiting", 16, 1)),
    ("segmenter", "qp_context"): (("start_psn", 0, 24), ("enable", 31, 1)),
    ("spray", "status"): (("cmd_pending", 0, 1), ("engine_busy", 1, 1), ("pipe_busy", 2, 1)),
    ("rx_engine", "status"): (("pending", 0, 1), ("ctrl", 1, 1)),
    ("tx_path", "qp.peer_path"): (("peer_t0", 0, 10), ("peer_port", 16, 10)),
    ("ports", "port.ctrl"): (("up", 0, 1), ("fabric_facing", 1, 1)),
}


def fields(block, register):
    """The packed fields of ``register`` of ``block`` (:data:`FIELDS`) as ``(name, lsb, width)``."""
    return FIELDS[(block, register)]


def _spray_table(comp):
    from rtl import spray_scheduler as s
    A, B = comp.slots, comp.backups
    members = [
        Register("slot_ev", s.OFF_SLOT_EV, "rw", 32, doc="slot EV; write: the slot holds it, "
                 "GOOD, refill", count=A),
        Register("slot_state", s.OFF_SLOT_STATE, "rw", 2, doc="slot state (G 0, S 1, A 2, D 3); "
                 "write: that state, no refill", count=A),
        Register("states", s.OFF_STATES, "ro", 32, doc="states of 16 slots, 2 bits each",
                 count=(A + 15) // 16),
        Register("pointer", s.OFF_POINTER, "ro", 32, doc="rotation pointer"),
        Register("lfsr", s.OFF_LFSR, "rw", 16, doc="LFSR; write: seed (1..0xFFFF)"),
        Register("plane_pointer", s.OFF_PLANE_POINTER, "ro", 32, doc="the QP's plane pointer"),
    ]
    if B:
        members += [
            Register("pool_ev", s.OFF_POOL_EV, "rw", 32, doc="backup pool entry EV; write: the "
                     "entry holds it, refill", count=B),
            Register("pool_valid", s.OFF_POOL_VALID, "rw", 1, doc="pool entry valid; write (any "
                     "data): the entry is emptied, refill", count=B),
        ]
    page = s.table_addr(0, 1, 0) - s.table_addr(0, 0, 0)
    qp = s.table_addr(1, 0, 0) - s.table_addr(0, 0, 0)
    plane = Array("plane", 0, comp.n_planes, page, members,
                  doc="EV table page of (QP, plane); table writes wait for status bit 0")
    return [Array("table", s.table_addr(0, 0, 0), comp.n_qps, qp, [plane],
                  doc="EV tables, one page per QP and plane (written by the table engine)")]


def _tx_path_contexts(comp):
    from rtl import tx_path as t
    return [Array("qp", t.QP_BASE, comp.n_qps, t.QP_STRIDE, [
        Register("peer_qpn", t.OFF_PEER_QPN, "rw", 24, doc="peer QPN"),
        Register("peer_host", t.OFF_PEER_HOST, "rw", 32, doc="peer host id"),
        Register("peer_path", t.OFF_PEER_PATH, "rw", 26, doc="peer T0 and host port"),
    ], doc="QP contexts (in a memory)")]


# Windows decoded by hand into memories: block -> function(component) -> items.
REGIONS = {"spray": _spray_table, "tx_path": _tx_path_contexts}

# Array names where the rows' common prefix is terse or missing: (block, prefix) -> name.
ARRAY_NAMES = {
    ("rx_front", "r"): "region", ("rx_front", "p"): "plane", ("rx_tracker", "q"): "qp",
    ("reliability", "q"): "qp", ("reliability", "p"): "probe_entry", ("ports", ""): "port",
    ("un_stage", ""): "route", ("plane_splitter", ""): "plane", ("tx_path", "port"): "port",
}

# SystemRDL and C keywords an instance name must not be (it names a C struct member too).
_RDL_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "do", "double", "else", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "switch", "typedef", "union", "void", "volatile",
    "while", "bool",
    "abstract", "accesstype", "addressingtype", "addrmap", "alias", "all", "bit", "boolean",
    "bothedge", "compact", "component", "componentwidth", "constraint", "default", "encode",
    "enum", "external", "false", "field", "fullalign", "hw", "inside", "internal", "level",
    "longint", "mem", "na", "negedge", "nonsticky", "number", "onreadtype", "onwritetype",
    "posedge", "property", "r", "rclr", "ref", "reg", "regalign", "regfile", "rset", "ruser",
    "rw", "rw1", "signal", "string", "struct", "sw", "this", "true", "type", "unsigned", "w",
    "w1", "wclr", "woclr", "woset", "wot", "wr", "wset", "wuser", "wzc", "wzs", "wzt",
}


# --- reading the RTL ----------------------------------------------------------------------------

def _reset(value):
    if isinstance(value, Signal):
        return value.init
    if isinstance(value, Slice) and isinstance(value.value, Signal):
        return value.value.init >> value.start & ((1 << (value.stop - value.start)) - 1)
    if isinstance(value, Const):
        return value.value
    return 0


_WIDE = re.compile(r"(.*)\[(\d+):(\d+)\]$")
_INDEX = re.compile(r"\d+")


def _rows(cmap):
    """The ConfigMap's rows as :class:`Register` objects (wide registers' words named
    ``name_w<k>``)."""
    out = []
    for addr, name, access, doc in cmap.doc_rows():
        value = cmap.reads[addr]
        if isinstance(value, int):
            value = Const(value, 32)
        base, part = name, None
        m = _WIDE.match(name)
        if m:
            base, part = m.group(1), int(m.group(3)) // 32
        write_action = access == "ro" and addr in cmap.strobed
        out.append((base, part, Register(
            name=f"{base}_w{part}" if part is not None else base, word=addr, access=access,
            width=len(value), reset=_reset(value) if access == "rw" else 0, doc=doc,
            write_action=write_action, rows=[name])))
    return out


def _member_name(template, prefix, part):
    rest = template.replace(prefix + "{}", "", 1) if prefix else template.replace("{}", "", 1)
    rest = rest.strip("_") or "value"
    return f"{rest}_w{part}" if part is not None else rest


def _fold(block, rows):
    """Rows that repeat with a constant stride into arrays; the others as they are."""
    groups = {}
    for base, part, reg in rows:
        m = _INDEX.search(base)
        if not m:
            continue
        template = base[:m.start()] + "{}" + base[m.end():]
        groups.setdefault((template, part), {})[int(m.group())] = reg
    candidates = []
    for (template, part), by_index in groups.items():
        n = len(by_index)
        if n < 2 or sorted(by_index) != list(range(n)):
            continue
        words = [by_index[i].word for i in range(n)]
        stride = words[1] - words[0]
        if stride <= 0 or any(words[i] != words[0] + i * stride for i in range(n)):
            continue
        kinds = {(r.access, r.width, r.write_action, r.doc.split(":", 1)[-1]) for r in
                 by_index.values()}
        candidates.append((words[0], template, part, n, stride, by_index))
    used, items = set(), []
    by_shape = {}
    for cand in sorted(candidates):
        by_shape.setdefault((cand[3], cand[4]), []).append(cand)
    for (n, stride), cands in by_shape.items():
        clusters = []
        for cand in cands:
            if clusters and cand[0] < clusters[-1][0][0] + stride and \
                    cand[0] - clusters[-1][0][0] not in {c[0] - clusters[-1][0][0]
                                                         for c in clusters[-1]}:
                clusters[-1].append(cand)
            else:
                clusters.append([cand])
        for cluster in clusters:
            base_word = cluster[0][0]
            prefixes = {c[1].split("{}")[0] for c in cluster}
            prefix = prefixes.pop() if len(prefixes) == 1 else ""
            if len(cluster) == 1 and stride == 1:       # a register array
                word, template, part, n, stride, by_index = cluster[0]
                reg = by_index[0]
                name = template.replace("{}", "").strip("_").replace("__", "_")
                if part is not None:
                    name = f"{name}_w{part}"
                items.append(Register(name, word, reg.access, reg.width, reg.reset,
                                      _strip_index(reg.doc), write_action=reg.write_action,
                                      count=n, stride=1,
                                      rows=[by_index[i].rows[0] for i in range(n)]))
            else:
                name = ARRAY_NAMES.get((block, prefix.rstrip("_")), prefix.rstrip("_") or "unit")
                members = []
                for word, template, part, _, _, by_index in cluster:
                    reg = by_index[0]
                    members.append(Register(
                        _member_name(template, prefix, part), word - base_word, reg.access,
                        reg.width, reg.reset, _strip_index(reg.doc),
                        write_action=reg.write_action,
                        rows=[by_index[i].rows[0] for i in range(n)]))
                items.append(Array(name, base_word, n, stride, members))
            for c in cluster:
                used.update(id(r) for r in c[5].values())
    for _, _, reg in rows:
        if id(reg) not in used:
            items.append(reg)
    names = [item.name for item in items]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ValueError(f"{block}: names {clash} used twice after folding rows into arrays; "
                         f"name the array in rtl/regmap.py ARRAY_NAMES")
    return sorted(items, key=lambda item: item.word)


def _strip_index(doc):
    """A row description without its leading index (``"QP 0: ..."`` -> ``"QP: ..."``)."""
    return re.sub(r"^((?:table entry|region|plane|port|egress|ingress|QP|qp) )\d+", r"\1n", doc)


def _annotate(block, items, prefix=""):
    for item in items:
        if isinstance(item, Array):
            _annotate(block, item.members, f"{prefix}{item.name}.")
            continue
        spec = FIELDS.get((block, prefix + item.name))
        if spec is None:
            item.fields = [Field("value", 0, item.width)]
            continue
        taken = 0
        for name, lsb, width in spec:
            mask = (1 << width) - 1 << lsb
            if lsb + width > 32 or taken & mask:
                raise ValueError(f"{block}.{prefix}{item.name}: field {name} [{lsb + width - 1}:"
                                 f"{lsb}] overlaps another or leaves the word")
            taken |= mask
            item.fields.append(Field(name, lsb, width))
        if taken >> item.width and item.access != "ro":
            raise ValueError(f"{block}.{prefix}{item.name}: fields reach bit "
                             f"{taken.bit_length() - 1} of a {item.width}-bit register")


def _walk(fragment, path=""):
    yield path, fragment
    for sub, name, *_ in fragment.subfragments:
        yield from _walk(sub, f"{path}.{name}" if path else str(name))


def build(top, **params):
    """The :class:`RegMap` of ``top`` (a key of :data:`TOPS`) built with ``params`` (default:
    the parameters ``rtl/gen.py`` builds it with)."""
    import importlib
    from rtl.gen import TOPS as GEN
    module, cls, blocks, doc = TOPS[top]
    if not params:
        params = dict(re.findall(r"(\w+)=([^,)]+)", GEN[top].description))
        params = {k: int(v.replace("_", "")) if v.replace("_", "").isdigit() else v
                  for k, v in params.items()}
    component = getattr(importlib.import_module(module), cls)(**params)
    with collect_maps() as maps:
        fragment = Fragment.get(component, None)
    where, owners = {}, {}
    for path, frag in _walk(fragment):
        for origin in frag.origins or ():
            where[id(origin)] = path
            owners.setdefault(path, origin)
    by_path = {}
    for cmap in maps:
        path = where.get(id(cmap.m))
        if path is None:
            raise ValueError(f"{top}: ConfigMap {cmap.name!r} outside the elaborated hierarchy")
        by_path[path] = cmap
    known = {entry[0] for entry in blocks.values()}
    stray = sorted(set(by_path) - known)
    if stray:
        raise ValueError(f"{top}: ConfigMaps at {stray} belong to no block of rtl/regmap.py "
                         f"(known: {sorted(known)}): add them to its composition table")
    out = []
    for name, entry in blocks.items():
        path, base, width = entry[:3]
        rows_at = entry[3] if len(entry) > 3 else 0
        cmap = by_path.get(path)
        if cmap is None:
            raise ValueError(f"{top}: no ConfigMap at {path!r} for block {name}")
        rows = _rows(cmap)
        for _, _, reg in rows:
            reg.word -= rows_at
        items = _fold(name, rows)
        if name in REGIONS:
            items = sorted(items + REGIONS[name](owners[path]), key=lambda item: item.word)
        _annotate(name, items)
        out.append(Block(name, path, base, width or len(cmap.port.cfg_addr),
                         _BLOCK_DOCS.get(name, name), items))
    regmap = RegMap(top, params, doc, sorted(out, key=lambda b: b.base))
    regmap.words()          # raises on an address used twice
    return regmap


# --- SystemRDL ------------------------------------------------------------------------------

def _ident(name):
    name = re.sub(r"\W", "_", name)
    if name[0].isdigit():
        name = "_" + name
    return name + "_" if name in _RDL_KEYWORDS else name


def _str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_ACCESS_DOC = {"rw": "read/write", "ro": "read-only",
               "counter": "counter: 32 bits, wraps, any write clears it"}


def _reg_rdl(reg, indent):
    pad = " " * indent
    doc = reg.doc or reg.name
    desc = _ACCESS_DOC[reg.access] + ("; the block acts on writes" if reg.write_action else "")
    if reg.access == "rw":
        sw, hw, extra = "rw", "r", ""
    elif reg.access == "counter":
        sw, hw, extra = "rw", "rw", " onwrite = wclr;"
    elif reg.write_action:
        sw, hw, extra = "rw", "rw", ""
    else:
        sw, hw, extra = "r", "w", ""
    lines = [f"{pad}reg {{", f"{pad}    name = {_str(doc)};", f"{pad}    desc = {_str(desc)};"]
    for f in reg.fields:
        width = f.width if f.name != "value" else reg.width
        reset = ""
        if reg.access == "rw":
            reset = f" = 0x{reg.reset >> f.lsb & ((1 << width) - 1):X}"
        lines.append(f"{pad}    field {{ sw = {sw}; hw = {hw};{extra} }} "
                     f"{_ident(f.name)}[{f.lsb + width - 1}:{f.lsb}]{reset};")
    dims = f"[{reg.count}]" if reg.count > 1 else ""
    stride = f" += 0x{WORD * reg.stride:X}" if reg.count > 1 else ""
    lines.append(f"{pad}}} {_ident(reg.name)}{dims} @ 0x{WORD * reg.word:X}{stride};")
    return lines


def _items_rdl(items, indent):
    lines = []
    for item in items:
        if isinstance(item, Array):
            pad = " " * indent
            lines.append(f"{pad}regfile {{")
            if item.doc:
                lines.append(f"{pad}    desc = {_str(item.doc)};")
            lines += _items_rdl(item.members, indent + 4)
            lines.append(f"{pad}}} {_ident(item.name)}[{item.count}] @ 0x{WORD * item.word:X} "
                         f"+= 0x{WORD * item.stride:X};")
        else:
            lines += _reg_rdl(item, indent)
    return lines


def systemrdl(regmap):
    """The SystemRDL 2.0 text of ``regmap``: one ``addrmap mrc_<top>`` holding an addrmap per
    block at its byte address (word address x 4, docs/registers.md section 1)."""
    params = ", ".join(f"{k}={v}" for k, v in regmap.params.items())
    lines = [
        "// SPDX-License-Identifier: BSD-2-Clause",
        f"// The configuration map of {regmap.top} ({params}), generated from the RTL by",
        "// `python -m rtl.regmap` (rtl/regmap.py): do not edit. Byte addresses = 4 x word.",
        "",
        f"addrmap mrc_{regmap.top} {{",
        f"    name = {_str(regmap.doc)};",
        f"    desc = {_str(f'Parameters: {params}. Every register is one 32-bit word; unmapped words read 0 and ignore writes.')};",
        "    default regwidth = 32;",
        "    default accesswidth = 32;",
        "    addressing = regalign;",
        "",
    ]
    for b in regmap.blocks:
        lines.append("    addrmap {")
        lines.append(f"        name = {_str(b.doc)};")
        lines += _items_rdl(b.items, 8)
        lines.append(f"    }} {_ident(b.name)} @ 0x{WORD * b.base:X};")
        lines.append("")
    lines.append("};")
    return "\n".join(lines) + "\n"


# --- PeakRDL ----------------------------------------------------------------------------------

def _export(rdl_path, out):
    """Compile ``rdl_path`` with systemrdl-compiler and write the C header, IP-XACT and
    Markdown next to it in ``out``; returns the paths."""
    from peakrdl_cheader.exporter import CHeaderExporter
    from peakrdl_ipxact import IPXACTExporter
    from peakrdl_markdown import MarkdownExporter
    from systemrdl import RDLCompiler
    rdlc = RDLCompiler()
    rdlc.compile_file(str(rdl_path))
    root = rdlc.elaborate()
    stem = Path(rdl_path).stem
    paths = {"h": out / f"{stem}.h", "xml": out / f"{stem}.xml", "md": out / f"{stem}.md"}
    CHeaderExporter().export(root, str(paths["h"]))
    IPXACTExporter().export(root.top, str(paths["xml"]))
    MarkdownExporter().export(root.top, str(paths["md"]))
    return list(paths.values())


REGISTERS_MD = ROOT / "docs" / "registers.md"
MD_BEGIN = "<!-- REGMAP:BEGIN (generated by `make regs`: do not edit) -->"
MD_END = "<!-- REGMAP:END -->"


def summary(maps):
    """The generated section of docs/registers.md: every block of every top, with its byte
    address, its span and how many words it maps."""
    lines = ["| top (parameters) | block | byte address | words mapped | files |",
             "|---|---|---|---|---|"]
    for regmap in maps:
        params = ", ".join(f"{k}={v}" for k, v in regmap.params.items())
        counts = {}
        for _, (block, _, _) in regmap.words().items():
            counts[block] = counts.get(block, 0) + 1
        stem = f"regs/mrc_{regmap.top}"
        files = f"[rdl]({stem}.rdl), [C]({stem}.h), [IP-XACT]({stem}.xml), [doc]({stem}.md)"
        for k, b in enumerate(regmap.blocks):
            lines.append(f"| {f'`{regmap.top}` ({params})' if k == 0 else ''} | `{b.name}`: "
                         f"{b.doc} | 0x{WORD * b.base:07X} | {counts.get(b.name, 0)} | "
                         f"{files if k == 0 else ''} |")
    return "\n".join(lines)


def _registers_md(maps, text):
    start, end = text.find(MD_BEGIN), text.find(MD_END)
    if start < 0 or end < start:
        raise ValueError(f"{REGISTERS_MD}: no {MD_BEGIN!r} ... {MD_END!r} section")
    return text[:start] + MD_BEGIN + "\n" + summary(maps) + "\n" + text[end:]


def generate(out=OUT, tops=None, registers_md=REGISTERS_MD):
    """Write ``<out>/mrc_<top>.rdl`` and its C header, IP-XACT and Markdown for every top, and
    the generated section of ``registers_md`` (None: not); returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written, maps = [], []
    for top in tops or TOPS:
        regmap = build(top)
        maps.append(regmap)
        rdl = out / f"mrc_{top}.rdl"
        rdl.write_text(systemrdl(regmap))
        written += [rdl] + _export(rdl, out)
    if registers_md is not None:
        path = Path(registers_md)
        path.write_text(_registers_md(maps, path.read_text()))
        written.append(path)
    return written


def check(out=OUT, registers_md=REGISTERS_MD):
    """Regenerate into a temporary folder and compare with ``out`` and ``registers_md``: the
    names of the files that differ (or are missing)."""
    with tempfile.TemporaryDirectory() as tmp:
        md = Path(tmp) / "registers.md"
        md.write_text(Path(registers_md).read_text())
        fresh = generate(tmp, registers_md=md)
        stale = [p.name for p in fresh[:-1] if not (Path(out) / p.name).exists()
                 or (Path(out) / p.name).read_text() != p.read_text()]
        if md.read_text() != Path(registers_md).read_text():
            stale.append(Path(registers_md).name)
        return stale


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rtl.regmap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(OUT), help="output folder (default docs/regs)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the folder differs from what the RTL gives")
    args = parser.parse_args(argv)
    if args.check:
        stale = check(args.out)
        if stale:
            print(f"{args.out}: stale {stale}; run `make regs`", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    for path in generate(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
