#!/usr/bin/env python3
"""Per-kernel totals of an `ncu --metrics gpu__time_duration.sum --print-summary per-kernel` log:
`scripts/ncu-summary.py LOG...` prints the 18 largest (name, ms, share, launches) per log."""
import re, sys, collections
def parse(path):
    tot=collections.defaultdict(float); cnt=collections.defaultdict(int); cur=None; inv=0
    for line in open(path, errors='replace'):
        m=re.match(r'  (\S+) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Device \d+, CC [\d.]+, Invocations (\d+)', line)
        if m: cur=m.group(1); inv=int(m.group(2)); continue
        m=re.match(r'\s+gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)', line)
        if m and cur:
            scale={'ns':1e-6,'us':1e-3,'ms':1.0,'s':1e3,'nsecond':1e-6,'usecond':1e-3,'msecond':1.0}[m.group(1)]
            avg=float(m.group(4).replace(',',''))*scale
            name=re.sub(r'_(f32|f16|bf16|b16|b32)$','',cur)
            tot[cur]+=avg*inv; cnt[cur]+=inv; cur=None
    return tot,cnt
for f in sys.argv[1:]:
    tot,cnt=parse(f)
    T=sum(tot.values()); N=sum(cnt.values())
    print(f"## {f}: {T:.1f} ms of kernels in {N} launches")
    for k,v in sorted(tot.items(), key=lambda x:-x[1])[:18]:
        print(f"  {k:45s} {v:8.2f} ms {100*v/T:5.1f}%  ({cnt[k]} launches)")
