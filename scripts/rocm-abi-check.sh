#!/usr/bin/env bash
# rocm-abi-check.sh: does the one binary's view of HIP, hiprtc, rocBLAS and MIOpen hold for
# both ROCm toolchains? See --help.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
versions="6.4 7.2"
out=""

usage() {
    cat <<EOF
Usage: scripts/rocm-abi-check.sh [--out PATH] [--rocm "6.4 7.2"]

The backend is built once, against one set of HIP bindings (cubecl-hip-sys) and rocBLAS and
MIOpen bindings generated from the ROCm 6.4 headers, and loads whichever ROCm the machine has.
That is sound only where the headers of every supported ROCm agree on what the binary
uses. This script compiles one C++ program against each toolchain chroot's own headers
(scripts/rocm-chroot.sh --rocm V) that prints, for everything the binary touches:
  - the type of every function it binds (rocm-backend/src/runtime.rs HIP_SYMBOLS and
    HIPRTC_SYMBOLS, rocblas-sys and miopen-sys SYMBOLS), as the compiler spells it;
  - the value of every enumerator and constant it passes or tests (the hip:: constants
    rocm-backend/src names, the literals it passes: hipMemcpyKind, stream/event/host-alloc
    flags; every constant of the rocBLAS and MIOpen bindings);
  - sizeof(hipDeviceProp_tR0600) and the offsets of the fields read (gcnArchName, name,
    totalGlobalMem);
then compares the toolchains line by line. Differences that do not change the ABI are
listed in KNOWN below with the reason; any other difference fails (exit 1).

--out writes the report as markdown (date, toolchains, every difference). Needs root and
both chroots built.
EOF
}

while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --out) out=$2; shift 2 ;;
        --rocm) versions=$2; shift 2 ;;
        *) echo "rocm-abi-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

work=$(mktemp -d /tmp/rocm-abi-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The program, generated from the Rust sources so that it follows them.
python3 - "$repo" "$work/facts.cpp" <<'PYEOF'
import re, sys
repo, out = sys.argv[1], sys.argv[2]
rt = open(f"{repo}/rocm-backend/src/runtime.rs").read()
def rust_list(name, text):
    body = re.search(rf"pub const {name}: &\[&str\] = &\[(.*?)\];", text, re.S).group(1)
    return re.findall(r'"(\w+)"', body)
hip_fns = rust_list("HIP_SYMBOLS", rt) + rust_list("HIPRTC_SYMBOLS", rt)
rb = open(f"{repo}/rocblas-sys/src/bindings.rs").read()
mi = open(f"{repo}/miopen-sys/src/bindings.rs").read()
blas_fns, miopen_fns = rust_list("SYMBOLS", rb), rust_list("SYMBOLS", mi)
consts = lambda text: re.findall(r"^pub const (\w+): \w+ = ", text, re.M)
blas_consts, miopen_consts = consts(rb), consts(mi)
# hip:: enumerators the backend names, as bindgen spells them: <enum type>_<enumerator>.
import glob
used = set()
for f in glob.glob(f"{repo}/rocm-backend/src/**/*.rs", recursive=True):
    used |= set(re.findall(r"hip::(\w+)", open(f).read()))
hip_enums = sorted({m.group(2) for n in used for m in [re.match(r"^(hipError_t|hipDeviceAttribute_t|hipMemcpyKind|hiprtcResult|hipFuncAttribute)_(\w+)$", n)] if m})
# Literals the backend passes by value (buffer.rs, stream.rs, host_buffer.rs).
hip_literals = ["hipMemcpyHostToDevice", "hipMemcpyDeviceToHost", "hipMemcpyDeviceToDevice", "hipStreamDefault",
                "hipStreamNonBlocking", "hipEventDefault", "hipEventDisableTiming", "hipEventBlockingSync",
                "hipHostMallocDefault", "hipErrorNoDevice", "hipErrorOutOfMemory", "hipErrorInvalidDevice"]
src = ["#include <hip/hip_runtime_api.h>", "#include <hip/hiprtc.h>", "#include <rocblas/rocblas.h>",
       "#include <miopen/miopen.h>", "#include <cstddef>", "#include <cstdio>",
       "template <typename T> const char* type_of() { return __PRETTY_FUNCTION__; }",
       "int main() {"]
# C++ overloads these with templates; the C function is picked by a cast to its signature
# in the 6.4 headers, which fails to compile (a difference found) if a toolchain changed it.
overloaded = {"hipMalloc": "hipError_t (*)(void**, size_t)",
              "hipHostMalloc": "hipError_t (*)(void**, size_t, unsigned int)"}
for f in hip_fns + blas_fns + miopen_fns:
    expr = f"static_cast<{overloaded[f]}>({f})" if f in overloaded else f
    src.append(f'  std::printf("fn {f} %s\\n", type_of<decltype({expr})>());')
for c in sorted(set(hip_enums + hip_literals)) + blas_consts + miopen_consts:
    src.append(f'  std::printf("value {c} %lld\\n", (long long)({c}));')
src.append('  std::printf("layout sizeof(hipDeviceProp_tR0600) %zu\\n", sizeof(hipDeviceProp_tR0600));')
for field in ["name", "totalGlobalMem", "gcnArchName"]:
    src.append(f'  std::printf("layout offsetof(hipDeviceProp_tR0600,{field}) %zu\\n", offsetof(hipDeviceProp_tR0600, {field}));')
src += ["  return 0;", "}"]
open(out, "w").write("\n".join(src) + "\n")
print(f"rocm-abi-check: {len(hip_fns)} HIP/hiprtc, {len(blas_fns)} rocBLAS, {len(miopen_fns)} MIOpen functions; "
      f"{len(set(hip_enums + hip_literals))} HIP, {len(blas_consts)} rocBLAS, {len(miopen_consts)} MIOpen values", file=sys.stderr)
PYEOF

for v in $versions; do
    # Each toolchain's own clang++ (21 for 6.4, 22 for 7.2) and headers; the program only
    # prints compile-time facts, so it links nothing of ROCm.
    ROCM_CHROOT_ROCM=$v ROCM_CHROOT_BINDS="$work:$work" "$here/rocm-chroot.sh" run -- sh -c '
        set -e
        cxx=$(ls /usr/bin/clang++-* 2>/dev/null | sort -V | tail -n1)
        [ -n "$cxx" ] || { echo "no clang++ in the chroot" >&2; exit 1; }
        # A name these headers lack is a fact too: found from the compiler'"'"'s errors, its
        # line dropped, and reported as absent.
        cp "$0/facts.cpp" "$0/facts-$1.cpp"
        : >"$0/absent-$1.txt"
        if ! "$cxx" -std=c++17 -D__HIP_PLATFORM_AMD__ -w -fsyntax-only -ferror-limit=0 "$0/facts-$1.cpp" 2>"$0/errors-$1.txt"; then
            sed -n "s/.*use of undeclared identifier .\([A-Za-z_0-9]*\).*/\1/p" "$0/errors-$1.txt" | sort -u >"$0/absent-$1.txt"
            for n in $(cat "$0/absent-$1.txt"); do sed -i "/ $n %/d" "$0/facts-$1.cpp"; done
        fi
        "$cxx" -std=c++17 -D__HIP_PLATFORM_AMD__ -w -o "$0/facts-$1" "$0/facts-$1.cpp"
        "$0/facts-$1" >"$0/facts-$1.txt"
        echo "HIP $(hipconfig --version), $("$cxx" --version | head -n1)" >"$0/toolchain-$1.txt"
    ' "$work" "$v"
done

# Python compares, applies KNOWN and writes the report.
WORK="$work" VERSIONS="$versions" OUT="$out" REPO="$repo" python3 - <<'PYEOF'
import datetime, os, re, sys
work, versions, out, repo = os.environ["WORK"], os.environ["VERSIONS"].split(), os.environ["OUT"], os.environ["REPO"]
# Differences that keep the ABI, with why. Keyed by the fact's name.
KNOWN = {
    "fn hiprtcCreateProgram": "HIP 7 made the headers and include-names arrays `const char* const*` (were "
        "`const char**`): the same pointer in the same register; the binary passes arrays it owns.",
    "fn hiprtcCompileProgram": "HIP 7 made the options array `const char* const*` (was `const char**`): same ABI.",
    "value rocblas_datatype_f8_r": "rocBLAS 5 dropped its 8-bit float datatypes; the backend passes only the f16, "
        "bf16 and f32 ones (rocm-backend/src/blas.rs), whose values are unchanged.",
    "value rocblas_datatype_bf8_r": "as rocblas_datatype_f8_r: dropped in rocBLAS 5, never passed by the backend.",
}
facts = {}
for v in versions:
    d = {}
    for name in open(f"{work}/absent-{v}.txt").read().split():
        d[f"value {name}"] = "(absent)"
    for line in open(f"{work}/facts-{v}.txt"):
        kind, name, value = line.rstrip("\n").split(" ", 2)
        # __PRETTY_FUNCTION__'s wrapper around the type: keep the type alone.
        value = re.sub(r"^const char \*type_of\(\) \[T = (.*)\]$", r"\1", value)
        d[f"{kind} {name}"] = value
    facts[v] = (d, open(f"{work}/toolchain-{v}.txt").read().strip())
base = versions[0]
problems, known, lines = [], [], []
for v in versions[1:]:
    a, b = facts[base][0], facts[v][0]
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        row = f"| `{key}` | `{a.get(key, '(absent)')}` | `{b.get(key, '(absent)')}` |"
        if key in KNOWN:
            known.append(row + f" {KNOWN[key]} |")
        else:
            problems.append(row + " **not known to keep the ABI** |")
n = len(facts[base][0])
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
doc = ["# The one binary's ROCm ABI under each toolchain (scripts/rocm-abi-check.sh)", "",
       f"- date: {now}", f"- command: `scripts/rocm-abi-check.sh{' --out ' + out if out else ''}`"]
for v in versions:
    doc.append(f"- ROCm {v} chroot: {facts[v][1]}")
doc += [f"- {n} facts compared (function types, enumerator and constant values, hipDeviceProp_tR0600 layout)",
        f"- result: {'PASS' if not problems else 'FAIL'}: {len(known)} known ABI-neutral differences, {len(problems)} others", "",
        f"Layout under {base}: " + ", ".join(f"{k.split(' ', 1)[1]} = {val}" for k, val in facts[base][0].items() if k.startswith("layout")), "",
        f"| fact | ROCm {base} | ROCm {' / '.join(versions[1:])} | why it keeps the ABI |", "|---|---|---|---|"]
doc += known + problems
text = "\n".join(doc) + "\n"
print(text)
if out:
    path = out if out.startswith("/") else os.path.join(repo, out)
    open(path, "w").write(text)
    print(f"rocm-abi-check: wrote {path}", file=sys.stderr)
if problems:
    print(f"rocm-abi-check: FAILED: {len(problems)} differences not known to keep the ABI", file=sys.stderr)
    sys.exit(1)
print(f"rocm-abi-check: ok, {n} facts agree or differ only as KNOWN", file=sys.stderr)
PYEOF
