#!/usr/bin/env python3
"""Where an image's .text goes, by source file.

cargo bloat counts bytes per function, but with LTO and opt-level "z" most
of homa-stack is inlined into the firmware's `main`, so it reports one big
function. This script asks the debug info instead: every instruction of
.text is charged to the innermost inlined frame at its address that lies in
homa-stack, homa-phy or the firmware (else to the library function it is
in, e.g. compiler_builtins' memcpy). Needs llvm-objdump and
llvm-addr2line (Debian's `llvm`), and an image built with debug info (the
crate's release profile keeps it; it costs no flash).

    tools/text-by-source.py target/thumbv7em-none-eabihf/release/size-probe [--files]

By default homa-stack is summed per top-level directory
(`homa-stack/src/endpoint/**`); `--files` lists every file.
"""
import collections
import re
import subprocess
import sys


def main():
    elf = sys.argv[1]
    per_file = "--files" in sys.argv[2:]
    dis = subprocess.run(
        ["llvm-objdump", "-d", "--no-show-raw-insn", "-j", ".text", elf],
        capture_output=True, text=True, check=True).stdout
    addrs = sorted({int(m.group(1), 16)
                    for m in re.finditer(r"^\s+([0-9a-f]+):\s", dis, re.M)})
    end = None
    for line in subprocess.run(["llvm-size", "-A", elf], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        if line.startswith(".text"):
            _, size, start = line.split()
            end = int(start) + int(size)
    sizes = {a: (addrs[i + 1] if i + 1 < len(addrs) else end) - a
             for i, a in enumerate(addrs)}
    out = subprocess.run(
        ["llvm-addr2line", "-e", elf, "-f", "-i", "-C", "-a"],
        input="\n".join(hex(a) for a in addrs), capture_output=True,
        text=True, check=True).stdout.splitlines()
    chains, cur, i = {}, None, 0
    while i < len(out):
        if out[i].startswith("0x"):
            cur = int(out[i], 16)
            chains[cur] = []
            i += 1
        else:
            chains[cur].append((out[i], out[i + 1] if i + 1 < len(out) else ""))
            i += 2
    totals = collections.Counter()
    for addr, size in sizes.items():
        totals[category(chains.get(addr, []), per_file)] += size
    for name, size in totals.most_common():
        print(f"{size:7d}  {name}")
    print(f"{sum(totals.values()):7d}  .text")


def category(chain, per_file):
    for _, loc in chain:
        path = loc.rsplit(":", 1)[0]
        for crate in ("homa-stack", "homa-phy"):
            marker = f"/{crate}/src/"
            if marker in path:
                rest = path.split(marker)[1]
                if crate == "homa-stack" and not per_file and "/" in rest:
                    rest = rest.split("/")[0] + "/**"
                return f"{crate}/src/{rest}"
        if "/examples/firmware/" in path:
            return "firmware/" + path.split("/examples/firmware/")[1]
    fn, loc = chain[0] if chain else ("?", "?")
    if any("compiler_builtins" in f + l or f.startswith(("__aeabi", "__udiv"))
           for f, l in chain):
        return "compiler_builtins (mem*, 64-bit division)"
    if "/library/core/" in loc:
        return "core, not inlined into a crate above"
    return "other"


if __name__ == "__main__":
    main()
