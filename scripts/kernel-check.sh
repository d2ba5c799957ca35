#!/usr/bin/env bash
# kernel-check.sh: compile every kernel source of kernels/src with hipcc, for every target
# architecture, and check each kernel's resource usage. See --help.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
ARCHS_DEFAULT="gfx1030 gfx1100 gfx1101 gfx1151 gfx1200 gfx1201 gfx90a gfx942"
archs=$ARCHS_DEFAULT
out=""
rocm="${ROCM_CHROOT_ROCM:-6.4}"
compare=()
jobs=$(nproc 2>/dev/null || echo 2)
sources=""
keep=""
LDS_LIMIT=65536

usage() {
    cat <<EOF
Usage: scripts/kernel-check.sh [--rocm 6.4|7.2] [--out PATH] [--archs "gfxA gfxB ..."] [--jobs N]
                               [--sources "a.hip b.hip"] [--keep DIR] [--no-write]
       scripts/kernel-check.sh --compare A.md B.md [--out PATH]

Compiles every kernels/src/*.hip (its headers prelude.h and mma.h found through -I kernels/src)
with the hipcc of the ROCm chroot of --rocm (scripts/rocm-chroot.sh --rocm V run; default
\$ROCM_CHROOT_ROCM, else 6.4), once per source and architecture, as
  hipcc -x hip --offload-arch=<arch> -O3 --cuda-device-only -c
        -Rpass-analysis=kernel-resource-usage
and turns the compiler's resource remarks into a table, kernel x arch: VGPRs (+AGPRs on
CDNA), SGPRs, occupancy (waves per SIMD), VGPR/SGPR spills, LDS bytes, scratch bytes.

Prints a summary and the table, writes the table as markdown (with date, machine, command
and toolchain at the top) to --out (default docs/measurements/kernel-resources.md for 6.4,
docs/measurements/kernel-resources-rocm7.2.md for 7.2, relative to the
repository root; --no-write to skip), and exits non-zero on any compile error, any spill,
LDS over 64 KiB, or a kernel listed in a source's instantiation lines that the compiler did
not emit for some architecture.

--compare reads two such tables (the same sources and archs, two toolchains) and writes the
kernels whose VGPRs, SGPRs, occupancy, spills, LDS or scratch differ, cell by cell, to --out
(default: stdout only); it exits non-zero only if a table cannot be read.

Options:
  --rocm    the toolchain: 6.4 (Debian unstable, hipcc 7.0.2 / clang 21) or 7.2 (experimental,
            hipcc 7.2.4 / clang 22); each has its own chroot (scripts/rocm-chroot.sh --help)
  --archs   target list (default: $ARCHS_DEFAULT)
  --jobs    parallel compiles (default: nproc = $jobs); each is one source for one arch
  --sources only these files of kernels/src (default: all *.hip)
  --keep    keep the compiler logs and objects in DIR (default: a temp dir, removed)
Needs: root, a built chroot (scripts/rocm-chroot.sh build), python3 on the host.
EOF
}

write=1
cmdline="scripts/kernel-check.sh $*"
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --out) out=$2; shift 2 ;;
        --archs) archs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --sources) sources=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        --no-write) write=0; shift ;;
        --rocm) rocm=$2; shift 2 ;;
        --compare) compare=("$2" "$3"); shift 3 ;;
        *) echo "kernel-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

command -v python3 >/dev/null || { echo "kernel-check: python3 is needed on the host to parse the remarks" >&2; exit 2; }
if [[ ${#compare[@]} -eq 2 ]]; then
    md_out=$out
    [[ -n $md_out && $md_out != /* ]] && md_out="$repo/$md_out"
    exec python3 "$here/kernel-compare.py" "${compare[0]}" "${compare[1]}" "$md_out" "$cmdline"
fi
case $rocm in
    6.4) out=${out:-docs/measurements/kernel-resources.md} ;;
    7.2 | 7.2.4) rocm=7.2; out=${out:-docs/measurements/kernel-resources-rocm7.2.md} ;;
    *) echo "kernel-check: unknown --rocm $rocm (6.4 or 7.2)" >&2; exit 2 ;;
esac
# Every chroot call below goes to this toolchain's chroot.
export ROCM_CHROOT_ROCM=$rocm
src_dir="$repo/kernels/src"
if [[ -z $sources ]]; then
    sources=$(cd "$src_dir" && ls *.hip)
fi
for s in $sources; do
    [[ -f $src_dir/$s ]] || { echo "kernel-check: no such source: $src_dir/$s" >&2; exit 2; }
done

if [[ -n $keep ]]; then
    mkdir -p "$keep"
    work=$(cd "$keep" && pwd)
else
    work=$(mktemp -d /tmp/kernel-check.XXXXXX)
    trap 'rm -rf "$work"' EXIT
fi

# One job per (source, arch); the remarks go to a log file per job, the exit code beside it.
: >"$work/jobs"
for s in $sources; do
    for a in $archs; do echo "$s $a" >>"$work/jobs"; done
done
cat >"$work/compile.sh" <<'EOF'
#!/bin/bash
# $1 source file name, $2 arch; runs inside the chroot.
src=$1 arch=$2
base="$WORK/${src%.hip}.$arch"
start=$(date +%s.%N)
hipcc -x hip --offload-arch="$arch" -O3 --cuda-device-only -c -I "$SRC_DIR" \
    -Rpass-analysis=kernel-resource-usage -o "$base.o" "$SRC_DIR/$src" >"$base.log" 2>&1
echo $? >"$base.rc"
end=$(date +%s.%N)
echo "$start $end" >"$base.time"
EOF
chmod +x "$work/compile.sh"

t0=$(date +%s)
njobs=$(wc -l <"$work/jobs")
echo "kernel-check: ROCm $rocm: $njobs compiles ($(echo $sources | wc -w) sources x $(echo $archs | wc -w) archs), $jobs at a time" >&2
ROCM_CHROOT_BINDS="$repo:$repo $work:$work" "$here/rocm-chroot.sh" run -- \
    env WORK="$work" SRC_DIR="$src_dir" JOBS="$jobs" bash -c \
    'xargs -P "$JOBS" -L 1 "$WORK/compile.sh" <"$WORK/jobs"'
elapsed=$(($(date +%s) - t0))

toolchain=$("$here/rocm-chroot.sh" run -- sh -c 'echo "ROCm '"$rocm"' chroot: HIP $(hipconfig --version); $(hipcc --version 2>&1 | grep -m1 -i "clang version"); hipcc $(dpkg-query -W -f "\${Version}" hipcc)"')
machine="$(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), no GPU needed (compile only)"

md_out=""
[[ $write -eq 1 ]] && md_out="$out"
[[ -n $md_out && $md_out != /* ]] && md_out="$repo/$md_out"

WORK="$work" SRC_DIR="$src_dir" ARCHS="$archs" SOURCES="$sources" LDS_LIMIT="$LDS_LIMIT" \
    MD_OUT="$md_out" CMDLINE="$cmdline" TOOLCHAIN="$toolchain" MACHINE="$machine" ELAPSED="$elapsed" \
    python3 - <<'PYEOF'
import os, re, sys, datetime

work, src_dir = os.environ["WORK"], os.environ["SRC_DIR"]
archs, sources = os.environ["ARCHS"].split(), os.environ["SOURCES"].split()
lds_limit = int(os.environ["LDS_LIMIT"])

# Entry points each source promises: its instantiation lines, `RV_EXPORT_<KIND>(symbol, ...)`
# at the start of a line (the same convention the Rust registry's tests read).
inst = re.compile(r"^RV_EXPORT_[A-Z0-9_]+\(\s*([a-z][a-z0-9_]*)\s*,", re.M)
remark = re.compile(r"remark:\s+(.*?)\s*\[-Rpass-analysis=kernel-resource-usage\]")

rows = {}      # (source, kernel) -> {arch: stats}
failures = []
warnings = []
compile_secs = {}
for src in sources:
    expected = inst.findall(open(os.path.join(src_dir, src)).read())
    if not expected:
        failures.append(f"{src}: no instantiation lines found")
    for arch in archs:
        base = os.path.join(work, f"{src[:-4]}.{arch}")
        try:
            rc = int(open(base + ".rc").read().strip())
        except (OSError, ValueError):
            rc = -1
        try:
            t = open(base + ".time").read().split()
            compile_secs[(src, arch)] = float(t[1]) - float(t[0])
        except (OSError, ValueError, IndexError):
            pass
        log = open(base + ".log", errors="replace").read() if os.path.exists(base + ".log") else ""
        if rc != 0:
            errs = [l for l in log.splitlines() if "error" in l][:10]
            failures.append(f"{src} for {arch}: hipcc exit code {rc}\n    " + "\n    ".join(errs or log.splitlines()[-10:]))
            continue
        cur = None
        for m in remark.finditer(log):
            text = m.group(1)
            if text.startswith("Function Name:"):
                cur = text.split(":", 1)[1].strip()
                rows.setdefault((src, cur), {})[arch] = {}
                continue
            if cur is None or ":" not in text:
                continue
            key, val = (x.strip() for x in text.rsplit(":", 1))
            rows[(src, cur)][arch][key] = val
        emitted = {k for (s, k), per in rows.items() if s == src and arch in per}
        for name in expected:
            if name not in emitted:
                failures.append(f"{src} for {arch}: kernel {name} has no resource remark (not emitted?)")

def num(st, key):
    v = st.get(key)
    try:
        return int(v)
    except (TypeError, ValueError):
        return None

table = []
for (src, kern), per in sorted(rows.items()):
    cells, lds, spills, scratch = [], 0, 0, 0
    for arch in archs:
        st = per.get(arch)
        if st is None:
            cells.append("-")
            continue
        v, a, s, occ = num(st, "VGPRs"), num(st, "AGPRs"), num(st, "TotalSGPRs"), num(st, "Occupancy [waves/SIMD]")
        vs, ss = num(st, "VGPRs Spill") or 0, num(st, "SGPRs Spill") or 0
        l, sc = num(st, "LDS Size [bytes/block]") or 0, num(st, "ScratchSize [bytes/lane]") or 0
        lds, spills, scratch = max(lds, l), spills + vs + ss, max(scratch, sc)
        if vs or ss:
            failures.append(f"{kern} on {arch}: spills (VGPR {vs}, SGPR {ss})")
        if l > lds_limit:
            failures.append(f"{kern} on {arch}: LDS {l} bytes > {lds_limit}")
        if sc:
            warnings.append(f"{kern} on {arch}: {sc} bytes/lane of scratch (private memory) without spills")
        if st.get("Dynamic Stack", "False") != "False":
            warnings.append(f"{kern} on {arch}: dynamic stack")
        vcell = f"{v}+{a}a" if a else f"{v}"
        cells.append(f"{vcell}/{s}/{occ}")
    table.append((src, kern, cells, spills, lds, scratch))

header = ["source", "kernel"] + archs + ["spills", "LDS B", "scratch B"]
lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
for src, kern, cells, spills, lds, scratch in table:
    lines.append("| " + " | ".join([src, f"`{kern}`"] + cells + [str(spills), str(lds), str(scratch)]) + " |")

# Per-arch extremes: the kernels nearest the limits.
summary = []
for arch in archs:
    best = None
    for (src, kern), per in rows.items():
        st = per.get(arch)
        if st is None:
            continue
        v = (num(st, "VGPRs") or 0) + (num(st, "AGPRs") or 0)
        occ = num(st, "Occupancy [waves/SIMD]") or 0
        if best is None or v > best[0]:
            best = (v, kern, occ)
    if best:
        worst_occ = min(((num(st[arch], "Occupancy [waves/SIMD]") or 0, k) for (s, k), st in rows.items() if arch in st))
        summary.append(f"- {arch}: most VGPRs {best[0]} (`{best[1]}`, occupancy {best[2]}); lowest occupancy {worst_occ[0]} (`{worst_occ[1]}`)")
max_lds = max(((t[4], t[1]) for t in table), default=(0, "-"))
summary.append(f"- largest LDS: {max_lds[0]} bytes (`{max_lds[1]}`), limit {lds_limit}")
summary.append(f"- spills: {sum(t[3] for t in table)} in total; kernels with scratch: {sum(1 for t in table if t[5])}")

now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
status = "PASS" if not failures else f"FAIL ({len(failures)} problems)"
total_compile = sum(compile_secs.values())
doc = [
    f"# Kernel resource usage (hipcc of ROCm {os.environ.get('ROCM_CHROOT_ROCM', '6.4')}, per architecture)",
    "",
    f"- date: {now}",
    f"- machine: {os.environ['MACHINE']}",
    f"- command: `{os.environ['CMDLINE']}`",
    f"- toolchain: {os.environ['TOOLCHAIN']}",
    f"- compile: `hipcc -x hip --offload-arch=<arch> -O3 --cuda-device-only -c -Rpass-analysis=kernel-resource-usage`, one compile per source and arch",
    f"- {len(table)} kernels x {len(archs)} architectures, {len(sources)} sources; wall time {os.environ['ELAPSED']} s (compile time summed over jobs: {total_compile:.0f} s)",
    f"- result: {status}",
    "",
    "Cells are `VGPRs/SGPRs/occupancy` (occupancy in waves per SIMD as the compiler reports it;",
    "`+Na` = AGPRs on CDNA). `spills` sums VGPR and SGPR spills over all architectures, `LDS B`",
    "and `scratch B` are the largest over all architectures. Every kernel is compiled with",
    "`__launch_bounds__(256)` (RV_MAX_THREADS in prelude.h).",
    "",
    "## Summary",
    "",
    *summary,
    "",
]
if failures:
    doc += ["## Failures", ""] + [f"- {f}" for f in failures] + [""]
if warnings:
    doc += ["## Warnings", ""] + [f"- {w}" for w in warnings] + [""]
doc += ["## Table", ""] + lines + [""]
text = "\n".join(doc)
print(text)
md_out = os.environ.get("MD_OUT")
if md_out:
    os.makedirs(os.path.dirname(md_out), exist_ok=True)
    with open(md_out, "w") as f:
        f.write(text)
    print(f"kernel-check: wrote {md_out}", file=sys.stderr)
if failures:
    print("kernel-check: FAILED:\n" + "\n".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"kernel-check: ok, {len(table)} kernels x {len(archs)} archs, no spills, LDS <= {lds_limit}", file=sys.stderr)
PYEOF
