#!/usr/bin/env python3
"""Where a homa-bench callgrind profile's stack instructions go, by concern.

`homa-bench --callgrind` prints one total per row; this splits a row's
stack instructions (the same ones it counts: lines of homa-stack,
homa-phy and smoltcp; code with no such file by its function's crate, or
else, like memcpy, shared between stack and harness in proportion to what
each spent calling it) into concerns: checksums, copies, header parse and
build, pool operations, RPC insert and free, queue bookkeeping, the
pacer, grants, timers, the device seam, trace and stats, and the engine's
remaining handlers.

Each instruction is charged once, by its source line: a line of a
homa-stack file goes to that file's concern, and within the endpoint's
handler files to the function whose body holds the line (so code inlined
from `insert_rpc` counts for RPC insert and free wherever it landed);
a line of Rust's library goes by the function it was compiled into.

    valgrind --tool=callgrind --toggle-collect='*bench::cpu::measured*' \\
      --callgrind-out-file=cg.rpc target/release/homa-bench --only homa-rpc --count 10000
    tools/callgrind-by-concern.py cg.rpc 10000        # per RPC
    tools/callgrind-by-concern.py cg.mb 2112          # per DATA packet (--only homa-mb --count 3)

The second argument divides: the operations, or the DATA packets the run
prints. Run it from the repository whose build made the profile.
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse(path):
    """Exclusive cost per (function, source file, line), and per call edge
    (caller, callee) the inclusive cost of the calls."""
    names = {"fl": {}, "fn": {}}

    def name(kind, text):
        text = text.strip()
        m = re.match(r"\((\d+)\)\s*(.*)", text)
        table = names[kind]
        if m:
            i, n = m.group(1), m.group(2)
            if n:
                table[i] = n
            return table.get(i, "?" + i)
        return text

    cost = collections.Counter()
    calls = collections.Counter()
    fl = fi = fn = cfn = None
    pending = False
    last = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            c0 = line[0]
            if c0.isdigit() or c0 in "+-*":
                parts = line.split()
                p = parts[0]
                pos = last if p == "*" else last + int(p) if p[0] in "+-" else int(p)
                last = pos
                c = int(parts[1]) if len(parts) > 1 else 0
                if pending:
                    calls[(fn, cfn)] += c
                    pending = False
                else:
                    cost[(fn, fi or fl, pos)] += c
                continue
            key, _, val = line.partition("=")
            if key == "fl":
                fl, fi = name("fl", val), None
            elif key in ("fi", "fe"):
                fi = name("fl", val)
            elif key == "fn":
                fn, fi = name("fn", val), None
            elif key == "cfn":
                cfn = name("fn", val)
            elif key in ("cfl", "cfi"):
                name("fl", val)
            elif key == "calls":
                pending = True
    return cost, calls


_owners = {}


def enclosing_fn(path, line):
    """The innermost `fn` whose body holds `line` of the source `path`
    (indentation tells where a body ends)."""
    p = path if os.path.isabs(path) else os.path.join(ROOT, path)
    if p not in _owners:
        try:
            lines = open(p).read().split("\n")
        except OSError:
            _owners[p] = None
            return None
        owner = [None] * (len(lines) + 2)
        stack = []
        for i, text in enumerate(lines, 1):
            s = text.lstrip()
            indent = len(text) - len(s)
            if s and not s.startswith(("//", "{", ")", ".", "where", "->", "|", "&&", "||")):
                while stack and indent <= stack[-1][0]:
                    stack.pop()
            m = re.match(r"(pub(\([^)]*\))?\s+)?(const\s+)?fn\s+(\w+)", s)
            if m:
                stack.append((indent, m.group(4)))
            owner[i] = stack[-1][1] if stack else None
        _owners[p] = owner
    owner = _owners[p]
    return owner[line] if owner and line < len(owner) else None


def owner_by_file(path):
    p = path.replace("\\", "/")
    if "homa-stack/" in p or "homa-phy/" in p or "/smoltcp-" in p:
        return "stack"
    if "tools/src/" in p or "testkit/" in p:
        return "harness"
    return None


def owner_by_fn(name):
    n = (name or "").lstrip("<")
    if n.startswith("&mut "):
        n = n[5:]
    krate = n.split("::")[0]
    if krate in ("homa_stack", "homa_phy", "smoltcp"):
        return "stack"
    if krate in ("homa_tools", "homa_testkit"):
        return "harness"
    return None


LIFECYCLE = (r"insert_rpc|free_rpc|Rpc::new|new_msgout|new_server_rpc|free_request|"
             r"ResendSet::new|PacketGrid::new|Ration::new|give_pages|release")


def concern(sym, path, inner):
    """The concern of an instruction of function `sym`, from source file
    `path`, in the source function `inner` (None outside our files)."""
    s, i = sym or "", inner or ""
    wire = re.search(r"wire/(homa|ipv4|ipv6|ethernet|mod|arp)\.rs", path) \
        or "homa-stack/src/macros.rs" in path
    if "memmove" in path or "memcpy" in s or "memcmp" in s:
        return "copy (memcpy)"
    if "wire/checksum.rs" in path or "wire::checksum::" in s or "verify_checksum" in s \
            or "pseudo_header" in s or i in ("fill_checksum", "verify_checksum", "pseudo_header"):
        return "checksums"
    if "storage/pool.rs" in path or "storage::pool::" in s:
        return "pool operations"
    if re.search(r"storage/(heap|meld)\.rs|endpoint/(queues|links|share)\.rs", path) \
            or re.search(r"storage::heap::|storage::meld::|endpoint::(queues|share)::", s):
        return "queue bookkeeping (refresh, heaps, lists, peer shares)"
    if "endpoint/pacer.rs" in path or "pacer::" in s:
        return "the pacer's pick"
    if "endpoint/grant.rs" in path or "grant::" in s:
        return "grants"
    if re.search(r"endpoint/timers?\.rs", path) or re.search(r"timers?::", s):
        return "timers"
    if "homa-phy/" in path or s.startswith("homa_phy") or "TxToken" in s or "RxToken" in s:
        return "device seam (homa-phy)"
    if "stats.rs" in path or "stats::" in s:
        return "trace and stats"
    if "storage/index.rs" in path or "storage::index::" in s or "endpoint/peer.rs" in path \
            or "peer::" in s or i == "find_rpc" or "find_rpc" in s:
        return "look-ups (hash index, peers)"
    if re.search(r"Repr::emit|emit_headers", s) \
            or (wire and (i.startswith("set_") or i in ("emit", "payload_mut"))) \
            or (re.search(r"endpoint/(host/|iface\.rs)", path) and i in ("emit_headers", "src_for")):
        return "header build (Ethernet, IPv4, Homa)"
    if re.search(r"Repr::parse|Packet<.*>::payload|check_len|new_checked", s) or wire:
        return "header parse (Ethernet, IPv4, Homa)"
    if re.search(LIFECYCLE, s) or re.fullmatch(LIFECYCLE, i):
        return "RPC insert and free"
    if re.search(r"storage/(holes|resend)\.rs|endpoint/resend\.rs", path) \
            or "holes::" in s or "resend::" in s:
        return "received ranges and resend sets"
    if re.search(r"endpoint/(host/|iface\.rs|ipv6\.rs)", path) or re.search(r"endpoint::(host|iface)::", s):
        return "host layer (Ethernet, IPv4, IPv6 dispatch)"
    if "endpoint/api.rs" in path or "endpoint::api::" in s:
        return "application calls (api.rs)"
    if "endpoint/input.rs" in path or "endpoint::input::" in s:
        return "receive handlers (input.rs)"
    if re.search(r"endpoint/(rpc/|rpc\.rs|types\.rs)", path) or "endpoint::rpc::" in s:
        return "RPC state (rpc/)"
    if re.search(r"endpoint/(output|mod|ctrl)\.rs", path) or "Endpoint::poll" in s \
            or "output::" in s or "ctrl::" in s:
        return "egress and the poll loop"
    if "storage/list.rs" in path or "list::" in s:
        return "queue bookkeeping (refresh, heaps, lists, peer shares)"
    return "other"


def by_concern(path):
    cost, calls = parse(path)
    # Who calls code that has no owner of its own (memcpy), and how much.
    callers = collections.defaultdict(collections.Counter)
    for (fn, cfn), c in calls.items():
        callers[cfn][owner_by_fn(fn) or "harness"] += c
    total = 0
    out = collections.Counter()
    for (fn, path_, line), c in cost.items():
        total += c
        who = owner_by_file(path_) or owner_by_fn(fn)
        if who is None:
            split = callers.get(fn)
            c = c * split["stack"] / sum(split.values()) if split and sum(split.values()) else 0
        elif who != "stack":
            continue
        inner = enclosing_fn(path_, line) if owner_by_file(path_) else None
        out[concern(fn, path_, inner)] += c
    return total, out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    div = float(sys.argv[2])
    total, out = by_concern(sys.argv[1])
    stack = sum(out.values())
    print(f"total {total / div:.0f}  stack {stack / div:.0f}  (per {div:g})")
    for k, v in sorted(out.items(), key=lambda kv: -kv[1]):
        print(f"{v / div:8.0f}  {k}")


if __name__ == "__main__":
    main()
