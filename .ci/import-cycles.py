#!/usr/bin/env python3
"""Import cycles between the modules of a crate's src/ (binaries aside):
module A imports B when A's code outside comments and tests names a path
into B (`use` lines and `crate::`/`super::`/`self::` paths), a module and
its own submodules excepted. Prints each cycle; exits 1 if there is one.

    .ci/import-cycles.py tools/src
"""
import os, re, sys
root = sys.argv[1]
mods = {}
for dp, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.join(dp, f); rel = os.path.relpath(p, root)[:-3]
        parts = rel.split('/')
        if parts[-1] in ('mod', 'lib', 'main'): parts = parts[:-1]
        if parts and parts[0] == 'bin': continue
        mods['::'.join(parts)] = p
def resolve(cur, path):
    segs = path.split('::')
    if segs[0] == 'crate': base = []; segs = segs[1:]
    elif segs[0] in ('super', 'self'):
        base = cur.split('::') if cur else []
        while segs and segs[0] in ('super','self'):
            if segs[0] == 'super': base = base[:-1]
            segs = segs[1:]
    else: return None
    best = None
    for i in range(len(segs)+1):
        cand = '::'.join(base + segs[:i])
        if cand in mods: best = cand
    return best
edges = {m: set() for m in mods}
pat = re.compile(r'\b((?:crate|super|self)(?:::\w+)+)')
for m, p in mods.items():
    text = open(p).read()
    text = text.split('#[cfg(test)]')[0]
    text = re.sub(r'//.*', '', text)
    for u in re.findall(r'use\s+([^;]+);', text) + pat.findall(text):
        u = u.replace(' ', '').replace('\n', '')
        # expand one level of braces
        mm = re.match(r'(.*?)::\{(.*)\}$', u)
        paths = [mm.group(1) + '::' + x for x in mm.group(2).split(',') if x] if mm else [u]
        for q in paths:
            q = q.split('{')[0].rstrip(':')
            t = resolve(m, q)
            if t and t != m and not m.startswith(t + '::') and not t.startswith(m + '::') and t != '':
                edges[m].add(t)
# cycles via Tarjan
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in mods:
    if v not in idx: sc(v)
for comp in sccs: print('cycle:', ' <-> '.join(comp))
sys.exit(1 if sccs else 0)
