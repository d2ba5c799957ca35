#!/usr/bin/env python3
"""kernel-compare.py A.md B.md [OUT.md] [CMDLINE]: two resource tables of scripts/kernel-check.sh
(the same kernels, two toolchains) side by side: every kernel whose VGPRs, AGPRs, SGPRs,
occupancy, spills, LDS or scratch differ on some architecture, cell by cell, with per-arch
counts. Called by `scripts/kernel-check.sh --compare A.md B.md [--out OUT.md]`.

It only reads the two tables; why a kernel differs is for the person reading it to work out
(and write below the generated part)."""
import datetime
import re
import sys


def read(path):
    text = open(path).read()
    meta = {}
    for line in text.splitlines():
        m = re.match(r"^- (date|toolchain|result|command): (.*)$", line)
        if m:
            meta[m.group(1)] = m.group(2)
    title = text.splitlines()[0].lstrip("# ").strip() if text else path
    rows, archs = {}, None
    for line in text.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "source":
            archs = cells[2:-3]
            continue
        if archs is None or len(cells) != len(archs) + 5:
            continue
        src, kern = cells[0], cells[1].strip("`")
        per = {}
        for arch, cell in zip(archs, cells[2:-3]):
            per[arch] = parse_cell(cell)
        rows[(src, kern)] = {
            "per": per,
            "spills": int(cells[-3]),
            "lds": int(cells[-2]),
            "scratch": int(cells[-1]),
        }
    if archs is None or not rows:
        sys.exit(f"kernel-compare: {path} holds no kernel-check table")
    return title, meta, archs, rows


def parse_cell(cell):
    """`VGPRs[+Na]/SGPRs/occupancy` -> (vgprs, agprs, sgprs, occupancy); '-' -> None."""
    if cell == "-":
        return None
    m = re.match(r"^(\d+)(?:\+(\d+)a)?/(\d+|None)/(\d+|None)$", cell)
    if not m:
        return ("?", cell)
    to = lambda x: None if x in (None, "None") else int(x)  # noqa: E731
    return (int(m.group(1)), to(m.group(2)) or 0, to(m.group(3)), to(m.group(4)))


def fmt(c):
    if c is None:
        return "-"
    v, a, s, o = c
    return f"{v}{f'+{a}a' if a else ''}/{s}/{o}"


def main():
    a_path, b_path = sys.argv[1], sys.argv[2]
    out = sys.argv[3] if len(sys.argv) > 3 else ""
    cmdline = sys.argv[4] if len(sys.argv) > 4 else f"scripts/kernel-check.sh --compare {a_path} {b_path}"
    ta, ma, archs_a, ra = read(a_path)
    tb, mb, archs_b, rb = read(b_path)
    archs = [x for x in archs_a if x in archs_b]
    only_a = sorted(set(ra) - set(rb))
    only_b = sorted(set(rb) - set(ra))
    diffs = []
    per_arch = {x: {"vgpr_up": 0, "vgpr_down": 0, "occ_up": 0, "occ_down": 0, "sgpr": 0} for x in archs}
    for key in sorted(set(ra) & set(rb)):
        x, y = ra[key], rb[key]
        changed = []
        for arch in archs:
            ca, cb = x["per"].get(arch), y["per"].get(arch)
            if ca != cb:
                changed.append((arch, ca, cb))
                if ca and cb and ca[0] != "?" and cb[0] != "?":
                    va, vb = ca[0] + ca[1], cb[0] + cb[1]
                    per_arch[arch]["vgpr_up"] += vb > va
                    per_arch[arch]["vgpr_down"] += vb < va
                    if ca[3] is not None and cb[3] is not None:
                        per_arch[arch]["occ_up"] += cb[3] > ca[3]
                        per_arch[arch]["occ_down"] += cb[3] < ca[3]
                    per_arch[arch]["sgpr"] += ca[2] != cb[2]
        other = [(n, x[n], y[n]) for n in ("spills", "lds", "scratch") if x[n] != y[n]]
        if changed or other:
            diffs.append((key, changed, other))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc = [
        "# Kernel resources, two toolchains side by side",
        "",
        f"- date: {now}",
        f"- command: `{cmdline}`",
        f"- A: `{a_path}`: {ta}; {ma.get('toolchain', '?')}; {ma.get('date', '?')}; {ma.get('result', '?')}",
        f"- B: `{b_path}`: {tb}; {mb.get('toolchain', '?')}; {mb.get('date', '?')}; {mb.get('result', '?')}",
        f"- {len(set(ra) & set(rb))} kernels in both, {len(archs)} architectures; "
        f"{len(diffs)} kernels differ somewhere; only in A: {len(only_a)}, only in B: {len(only_b)}",
        "",
        "Cells are `VGPRs/SGPRs/occupancy` as in the tables (`+Na` = AGPRs); `A -> B`.",
        "",
        "## Per architecture (kernels whose cell changed)",
        "",
        "| arch | VGPRs up | VGPRs down | SGPRs changed | occupancy up | occupancy down |",
        "|---|---|---|---|---|---|",
    ]
    for arch in archs:
        p = per_arch[arch]
        doc.append(f"| {arch} | {p['vgpr_up']} | {p['vgpr_down']} | {p['sgpr']} | {p['occ_up']} | {p['occ_down']} |")
    doc += ["", "## Spills, LDS, scratch (any difference)", ""]
    other_rows = [(k, o) for k, _, o in diffs if o]
    if other_rows:
        doc += ["| source | kernel | what | A | B |", "|---|---|---|---|---|"]
        for (src, kern), other in other_rows:
            for name, va, vb in other:
                doc.append(f"| {src} | `{kern}` | {name} | {va} | {vb} |")
    else:
        doc.append("None: every kernel has the same spills (0), LDS bytes and scratch bytes under both.")
    if only_a or only_b:
        doc += ["", "## Kernels in one table only", ""]
        doc += [f"- only in A: {s} `{k}`" for s, k in only_a] + [f"- only in B: {s} `{k}`" for s, k in only_b]
    doc += ["", "## Every kernel whose registers or occupancy differ", ""]
    doc += ["| source | kernel | " + " | ".join(archs) + " |", "|" + "---|" * (len(archs) + 2)]
    for (src, kern), changed, _ in diffs:
        if not changed:
            continue
        by = {arch: f"{fmt(ca)} -> {fmt(cb)}" for arch, ca, cb in changed}
        doc.append(f"| {src} | `{kern}` | " + " | ".join(by.get(arch, "=") for arch in archs) + " |")
    text = "\n".join(doc) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
        print(f"kernel-compare: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
