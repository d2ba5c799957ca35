#!/usr/bin/env bash
# rocm-chroot.sh: build (or reuse) a Debian chroot that carries a ROCm toolchain's
# development packages, and run commands inside it. See --help.
#
# Why a chroot: the ROCm toolchain tier of docs/architecture.md needs the real hipcc/clang, HIP
# headers, libamdhip64, hiprtc, rocBLAS and MIOpen. Debian packages them only in
# unstable (ROCm 6.4) and experimental (ROCm 7.2.4), and the host is bookworm, so they live
# in their own root filesystems, one per ROCm version (--rocm).
#
# Mounts are made inside a private mount namespace (unshare -m), so they vanish when the
# command ends, whatever way it ends, and concurrent `run` calls never unmount each
# other's /proc or /dev.
set -euo pipefail

# The ROCm version: --rocm VERSION before the command, else $ROCM_CHROOT_ROCM, else 6.4.
ROCM_VERSION="${ROCM_CHROOT_ROCM:-6.4}"
if [[ ${1:-} == --rocm ]]; then
    [[ $# -ge 2 ]] || { echo "rocm-chroot: error: --rocm needs a version (6.4 or 7.2)" >&2; exit 1; }
    ROCM_VERSION=$2
    shift 2
elif [[ ${1:-} == --rocm=* ]]; then
    ROCM_VERSION=${1#--rocm=}
    shift
fi

# Per version: the default root, the packages, and (7.2) the experimental pin.
# build-essential gives gcc for the smoke programs (hipcc also uses the host's libstdc++).
EXPERIMENTAL_PIN=""
case $ROCM_VERSION in
    6.4)
        # Debian unstable. hipcc brings clang/lld and the device libraries, libamdhip64-dev
        # the HIP headers, hipconfig and libamdhip64, libhiprtc-builtins / libhiprtc the
        # run-time compiler; rocBLAS and MIOpen for the library paths of the backend.
        # The root and the package list (hence the stamp's first line) are what they were
        # before --rocm existed, so a chroot built then is reused as it is.
        DEFAULT_ROOT=/opt/rocm-vision/chroot
        PACKAGES=(hipcc libamdhip64-dev librocblas-dev libmiopen-dev build-essential ca-certificates)
        INFO_PACKAGES="hipcc clang-21 libamdhip64-dev libamdhip64-6 libhiprtc6 libhiprtc-builtins6 librocblas-dev librocblas4 libmiopen-dev libmiopen1"
        ;;
    7.2 | 7.2.4)
        ROCM_VERSION=7.2
        # Debian unstable plus experimental, with experimental pinned for the ROCm packages
        # only (everything else, clang-22 and glibc included, stays unstable's). The four
        # versions are the ones checked against experimental on 2026-12-06 (issue 27); they
        # are named exactly so that a newer upload cannot change the toolchain unseen.
        DEFAULT_ROOT=/opt/rocm-vision/chroot-rocm7
        PACKAGES=(hipcc=7.2.4+dfsg-1~exp1 libamdhip64-dev=7.2.4-1~exp2 librocblas-dev=7.2.4-1~exp1
            libmiopen-dev=7.2.4+dfsg-1 build-essential ca-certificates)
        INFO_PACKAGES="hipcc clang-22 libamdhip64-dev libamdhip64-7 libhiprtc7 libhiprtc-builtins7 librocblas-dev librocblas5 libmiopen-dev libmiopen1 libamd-comgr3 libhsa-runtime64-1 rocm-device-libs-22"
        # The binary packages of the ROCm source packages hipcc, libamdhip64-dev, rocBLAS and
        # MIOpen 7.2.4 need from experimental (found with apt-get -s against experimental,
        # 2026-12-06): the HIP runtime and hiprtc, comgr, the HSA runtime, the device
        # libraries, roctx, rocBLAS and MIOpen, and their siblings in the ROCm stack.
        EXPERIMENTAL_PIN="hipcc libamdhip64* libhiprtc* librocblas* libmiopen* rocm-* libamd-comgr* libhsa* libroctx64* libroctracer* librocrand* libhiprand* libhipblas* libhipblaslt* librocsolver* librocsparse* libhipsparse* librocprim* libhipcub* rocminfo librocm*"
        ;;
    *)
        echo "rocm-chroot: error: unknown ROCm version '$ROCM_VERSION' (this script builds 6.4 or 7.2)" >&2
        exit 1
        ;;
esac

ROOT="${ROCM_CHROOT:-$DEFAULT_ROOT}"
SUITE="${ROCM_CHROOT_SUITE:-unstable}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
STAMP="$ROOT/.rocm-vision-complete"
BOOT_STAMP="$ROOT/.rocm-vision-debootstrap"

# Extra packages can be asked for without editing the script.
if [[ -n "${ROCM_CHROOT_EXTRA_PACKAGES:-}" ]]; then
    read -r -a _extra <<<"$ROCM_CHROOT_EXTRA_PACKAGES"
    PACKAGES+=("${_extra[@]}")
fi
APT_OPTS=(-o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -o Dpkg::Use-Pty=0)

die() { echo "rocm-chroot: error: $*" >&2; exit 1; }
log() { echo "rocm-chroot: $*" >&2; }

usage() {
    cat <<EOF
Usage:
  scripts/rocm-chroot.sh [--rocm V] [build]        build the ROCm chroot, or reuse it if complete
  scripts/rocm-chroot.sh [--rocm V] info           print the toolchain versions and library paths
  scripts/rocm-chroot.sh [--rocm V] run -- CMD...  run CMD inside the chroot
  scripts/rocm-chroot.sh [--rocm V] hipconfig ARGS run the chroot's real hipconfig (stdout only)
  scripts/rocm-chroot.sh --help

--rocm (or \$ROCM_CHROOT_ROCM) picks the toolchain, one chroot each:
  6.4 (default)  Debian unstable: hipcc 7.0.2 (clang 21), HIP 6.4, rocBLAS 4, MIOpen 6.4;
                 root /opt/rocm-vision/chroot
  7.2            Debian unstable + experimental pinned to the ROCm packages only: hipcc
                 7.2.4 (clang 22), HIP 7.2, rocBLAS 5, MIOpen 7.2; root /opt/rocm-vision/chroot-rocm7

This one ($ROCM_VERSION) is a Debian $SUITE root filesystem at \$ROCM_CHROOT
(now: $ROOT) with these packages and their dependencies:
  ${PACKAGES[*]}${EXPERIMENTAL_PIN:+
from experimental (apt pin 990; every other package of experimental pinned to 1):
  $EXPERIMENTAL_PIN}
It takes about 3 minutes and 5.4 GB to build (6 GB for 7.2). Building is idempotent: a complete chroot
carries the stamp file $STAMP (holding the package list) and is reused
as it is; delete that file to force the package step again.

The Debian mirror is read from this machine's apt sources
(/etc/apt/sources.list.d/debian.sources, else /etc/apt/sources.list), or from
\$ROCM_CHROOT_MIRROR. Every apt-get runs with -o Acquire::Check-Valid-Until=false,
since a mirror snapshot's Release files can be past their Valid-Until date.

run: mounts /proc and binds /dev (and /dev/pts, /sys) in a private mount namespace, then
chroots and runs CMD. Extra bind mounts come from \$ROCM_CHROOT_BINDS, a space-separated
list of HOST:INSIDE pairs, e.g.
  ROCM_CHROOT_BINDS="/work/main:/work/main /root/.cargo:/root/.cargo /root/.rustup:/root/.rustup"
If the current directory lies inside a bound path, CMD starts in the same directory
inside the chroot (else in /). The environment is passed through; PATH gets the
chroot's system directories appended.

hipconfig: for builds on the host that ask hipconfig (cubecl-hip-sys's build script reads
\`hipconfig --version\`), scripts/hipconfig is a wrapper that calls this.

Environment: ROCM_CHROOT_ROCM (6.4 or 7.2), ROCM_CHROOT (the root), ROCM_CHROOT_MIRROR,
ROCM_CHROOT_BINDS, ROCM_CHROOT_EXTRA_PACKAGES, ROCM_CHROOT_SUITE (default unstable).
Must run as root (debootstrap, chroot and mount need it).
EOF
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap, chroot and mount need it)"
}

# The first non-security URI in the machine's deb822 sources, else in sources.list.
host_mirror() {
    if [[ -n "${ROCM_CHROOT_MIRROR:-}" ]]; then
        echo "$ROCM_CHROOT_MIRROR"
        return
    fi
    local f=/etc/apt/sources.list.d/debian.sources uri=""
    if [[ -r $f ]]; then
        # deb822 stanzas are separated by blank lines; take URIs of the first stanza
        # whose Suites do not name a -security suite.
        uri=$(awk '
            BEGIN { RS=""; FS="\n" }
            {
                u=""; s=""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); split($i, a, /[ \t]+/); u = a[1] }
                    if ($i ~ /^Suites:/) { s = $i }
                }
                if (u != "" && s !~ /-security/) { print u; exit }
            }' "$f")
    fi
    if [[ -z $uri && -r /etc/apt/sources.list ]]; then
        uri=$(awk '$1 == "deb" && $0 !~ /security/ {
                    for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; exit } }' \
              /etc/apt/sources.list)
    fi
    [[ -n $uri ]] || die "no Debian mirror URI found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list; set ROCM_CHROOT_MIRROR"
    echo "${uri%/}"
}

check_network() {
    local mirror=$1 url="$1/dists/$SUITE/InRelease"
    if command -v curl >/dev/null; then
        curl -fsS --max-time 30 -o /dev/null "$url" ||
            die "cannot reach the Debian mirror ($url): no network or a wrong mirror; set ROCM_CHROOT_MIRROR"
    elif command -v wget >/dev/null; then
        wget -q -T 30 -O /dev/null "$url" ||
            die "cannot reach the Debian mirror ($url): no network or a wrong mirror; set ROCM_CHROOT_MIRROR"
    fi
}

ensure_debootstrap() {
    if ! command -v debootstrap >/dev/null; then
        log "debootstrap not found; installing it with apt-get"
        apt-get -o Acquire::Check-Valid-Until=false update -qq >&2 ||
            die "apt-get update failed (no network?); install debootstrap by hand"
        DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false install -y -qq debootstrap >&2 ||
            die "could not install debootstrap with apt-get"
    fi
    command -v debootstrap >/dev/null || die "debootstrap is still missing after apt-get install"
}

# Refuse to delete or reuse a half-built root while anything is mounted under it
# (an old debootstrap killed mid-way can leave /proc mounted there).
check_no_mounts() {
    if grep -q " ${ROOT}/" /proc/self/mounts; then
        die "something is still mounted under $ROOT:
$(grep " ${ROOT}/" /proc/self/mounts | awk '{print "  " $2}')
unmount it first (umount -R <path>)"
    fi
}

# Run "$@" inside the chroot, in a private mount namespace. The inner script does the
# mounts; they are dropped with the namespace when it exits.
in_chroot() {
    local binds="${ROCM_CHROOT_BINDS:-}" cwd=/ pair host inside
    for pair in $binds; do
        host=${pair%%:*}
        inside=${pair#*:}
        [[ -d $host || -f $host ]] || die "ROCM_CHROOT_BINDS: $host does not exist"
        if [[ $PWD == "$host" || $PWD == "$host"/* ]]; then
            cwd="$inside${PWD#"$host"}"
        fi
    done
    ROCM_CHROOT_INNER_ROOT="$ROOT" ROCM_CHROOT_INNER_BINDS="$binds" ROCM_CHROOT_INNER_CWD="$cwd" \
        unshare -m --propagation private -- bash -c '
        set -e
        r=$ROCM_CHROOT_INNER_ROOT
        mount -t proc proc "$r/proc"
        mount --rbind /dev "$r/dev"
        mount --rbind /sys "$r/sys"
        for pair in $ROCM_CHROOT_INNER_BINDS; do
            host=${pair%%:*}; inside=${pair#*:}
            if [ -d "$host" ]; then mkdir -p "$r$inside"; else mkdir -p "$(dirname "$r$inside")"; touch "$r$inside"; fi
            mount --rbind "$host" "$r$inside"
        done
        # /etc/resolv.conf is needed for apt inside; copy, never bind (the host file may be a link).
        cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
        export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        cd_to=$ROCM_CHROOT_INNER_CWD
        unset ROCM_CHROOT_INNER_ROOT ROCM_CHROOT_INNER_BINDS ROCM_CHROOT_INNER_CWD
        exec chroot "$r" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cd_to" "$@"
    ' rocm-chroot-ns "$@"
}

is_complete() {
    [[ -f $STAMP ]] && [[ "$(head -n1 "$STAMP")" == "packages: ${PACKAGES[*]}" ]]
}

build() {
    need_root "$@"
    local t0=$SECONDS mirror
    if is_complete; then
        log "reusing the complete chroot at $ROOT (stamp $STAMP)"
        info
        return
    fi
    ensure_debootstrap
    command -v unshare >/dev/null || die "unshare (util-linux) not found"
    mirror=$(host_mirror)
    log "mirror: $mirror  suite: $SUITE  root: $ROOT"
    check_network "$mirror"

    check_no_mounts
    if [[ ! -f $BOOT_STAMP ]]; then
        if [[ -e $ROOT ]]; then
            log "removing the incomplete chroot at $ROOT"
            rm -rf --one-file-system "$ROOT"
        fi
        mkdir -p "$ROOT"
        local gpg=(--keyring="$KEYRING")
        [[ -r $KEYRING ]] || { log "no $KEYRING; debootstrap runs with --no-check-gpg"; gpg=(--no-check-gpg); }
        log "debootstrap $SUITE (minbase)"
        # In its own mount namespace, so a debootstrap that dies leaves no mounts behind.
        if ! unshare -m --propagation private -- \
            debootstrap --variant=minbase "${gpg[@]}" "$SUITE" "$ROOT" "$mirror" >"$ROOT.debootstrap.log" 2>&1; then
            tail -n 30 "$ROOT.debootstrap.log" >&2
            die "debootstrap failed; full log in $ROOT.debootstrap.log"
        fi
        touch "$BOOT_STAMP"
        log "debootstrap done in $((SECONDS - t0)) s"
    fi

    # apt inside: the same mirror; never reject a Release file for its age.
    echo "deb $mirror $SUITE main" >"$ROOT/etc/apt/sources.list"
    rm -f "$ROOT/etc/apt/sources.list.d/"*.sources 2>/dev/null || true
    rm -f "$ROOT/etc/apt/preferences.d/rocm-vision-experimental"
    if [[ -n $EXPERIMENTAL_PIN ]]; then
        # experimental at priority 1 (never chosen on its own), the ROCm packages at 990
        # (chosen over unstable's): ROCm 7.2 from experimental, everything else unstable.
        echo "deb $mirror experimental main" >>"$ROOT/etc/apt/sources.list"
        mkdir -p "$ROOT/etc/apt/preferences.d"
        cat >"$ROOT/etc/apt/preferences.d/rocm-vision-experimental" <<EOF
Package: *
Pin: release a=experimental
Pin-Priority: 1

Package: $EXPERIMENTAL_PIN
Pin: release a=experimental
Pin-Priority: 990
EOF
    fi
    cat >"$ROOT/etc/apt/apt.conf.d/99rocm-vision" <<'EOF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
EOF
    log "apt-get install ${PACKAGES[*]}"
    in_chroot env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" update -q >&2 ||
        die "apt-get update inside the chroot failed"
    in_chroot env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y -q "${PACKAGES[@]}" >&2 ||
        die "apt-get install inside the chroot failed (package names: ${PACKAGES[*]})"
    in_chroot apt-get "${APT_OPTS[@]}" clean >&2
    # Check that what the tier needs is really there before stamping the chroot complete.
    in_chroot sh -c 'command -v hipcc >/dev/null && command -v hipconfig >/dev/null' ||
        die "hipcc or hipconfig missing after the install"
    if [[ -n $EXPERIMENTAL_PIN ]]; then
        # The pin is the whole point of this chroot: check that the ROCm packages did come
        # from experimental and that nothing outside the pin did.
        local from_exp outside p g ok want got
        from_exp=$(in_chroot sh -c 'apt list --installed 2>/dev/null | grep "/[a-z,]*experimental" | cut -d/ -f1')
        [[ -n $from_exp ]] || die "no package was installed from experimental (is experimental in $ROOT/etc/apt/sources.list?)"
        local pins
        # The pins are globs for apt, split here without expanding them as file names.
        read -r -a pins <<<"$EXPERIMENTAL_PIN"
        outside=$(for p in $from_exp; do
            ok=0
            for g in "${pins[@]}"; do
                # shellcheck disable=SC2053 # $g is a glob on purpose
                [[ $p == $g ]] && ok=1
            done
            [[ $ok -eq 1 ]] || echo "$p"
        done)
        [[ -z $outside ]] || die "packages outside the pin came from experimental: $outside"
        for want in "${PACKAGES[@]}"; do
            [[ $want == *=* ]] || continue
            got=$(in_chroot dpkg-query -W -f '${Version}' "${want%%=*}" 2>/dev/null || true)
            [[ $got == "${want#*=}" ]] || die "${want%%=*}: installed $got, wanted ${want#*=}"
        done
    fi
    {
        echo "packages: ${PACKAGES[*]}"
        echo "mirror: $mirror"
        echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - t0)) s"
    } >"$STAMP"
    log "chroot complete in $((SECONDS - t0)) s"
    info
}

info() {
    need_root
    [[ -f $STAMP ]] || die "no complete chroot at $ROOT; run: $0 build"
    in_chroot sh -c '
        echo "chroot:          '"$ROOT"' (ROCm '"$ROCM_VERSION"', $(du -sh --one-file-system / 2>/dev/null | cut -f1))"
        echo "$(sed -n 2,3p /.rocm-vision-complete)"
        echo "hipconfig --version: $(hipconfig --version)"
        echo "hipconfig --platform: $(hipconfig --platform 2>/dev/null)"
        echo "hipconfig --rocmpath: $(hipconfig --rocmpath 2>/dev/null)"
        echo "hipcc --version:"; hipcc --version 2>&1 | sed "s/^/    /"
        for lib in libamdhip64.so libhiprtc.so librocblas.so libMIOpen.so; do
            p=$(ldconfig -p | awk -v l="$lib" "\$1 == l { print \$NF; exit }")
            [ -n "$p" ] || p=$(find /usr/lib -name "$lib" 2>/dev/null | head -n1)
            echo "$lib: ${p:-NOT FOUND} -> $(readlink -f "${p:-/nonexistent}" 2>/dev/null)"
        done
        for h in hip/hip_runtime.h hip/hiprtc.h rocblas/rocblas.h miopen/miopen.h; do
            p=$(ls /usr/include/$h 2>/dev/null || find /usr -path "*/include/$h" 2>/dev/null | head -n1)
            echo "header $h: ${p:-NOT FOUND}"
        done
        echo "packages:"
        dpkg-query -W -f "    \${Package} \${Version}\n" '"$INFO_PACKAGES"' 2>/dev/null || true
        n=$(apt list --installed 2>/dev/null | grep -c "/[a-z,]*experimental" || true)
        echo "installed from experimental: $n package(s)"
    '
}

cmd=${1:-build}
case $cmd in
    -h | --help | help) usage ;;
    build) build ;;
    info) info ;;
    run)
        shift
        [[ ${1:-} == -- ]] && shift
        [[ $# -gt 0 ]] || die "run: no command given (usage: $0 run -- CMD...)"
        need_root
        [[ -f $STAMP ]] || die "no complete chroot at $ROOT; run: $0 build"
        in_chroot "$@"
        ;;
    hipconfig)
        shift
        need_root
        [[ -f $STAMP ]] || die "no complete chroot at $ROOT; run: $0 build"
        in_chroot hipconfig "$@"
        ;;
    *)
        usage >&2
        die "unknown command: $cmd"
        ;;
esac
