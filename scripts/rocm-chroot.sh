#!/usr/bin/env bash
# rocm-chroot.sh: build (or reuse) a Debian unstable chroot that carries the ROCm 6.4
# development packages, and run commands inside it. See --help.
#
# Why a chroot: the ROCm toolchain tier of DESIGN.md needs the real hipcc/clang, HIP
# headers, libamdhip64, hiprtc, rocBLAS and MIOpen. Debian packages them only in
# unstable, and the host is bookworm, so they live in their own root filesystem.
#
# Mounts are made inside a private mount namespace (unshare -m), so they vanish when the
# command ends, whatever way it ends, and concurrent `run` calls never unmount each
# other's /proc or /dev.
set -euo pipefail

ROOT="${ROCM_CHROOT:-/opt/rocm-vision/chroot}"
SUITE="${ROCM_CHROOT_SUITE:-unstable}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
STAMP="$ROOT/.rocm-vision-complete"
BOOT_STAMP="$ROOT/.rocm-vision-debootstrap"

# The ROCm packages we need. hipcc brings clang/lld and the device libraries,
# libamdhip64-dev the HIP headers, hipconfig and libamdhip64, libhiprtc-builtins /
# libhiprtc the run-time compiler; rocBLAS and MIOpen for the library paths of the backend.
# build-essential gives gcc for the smoke programs (hipcc also uses the host's libstdc++).
PACKAGES=(hipcc libamdhip64-dev librocblas-dev libmiopen-dev build-essential ca-certificates)
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
  scripts/rocm-chroot.sh [build]          build the ROCm chroot, or reuse it if complete
  scripts/rocm-chroot.sh info             print the toolchain versions and library paths
  scripts/rocm-chroot.sh run -- CMD...    run CMD inside the chroot
  scripts/rocm-chroot.sh hipconfig ARGS   run the chroot's real hipconfig (stdout only)
  scripts/rocm-chroot.sh --help

The chroot is a Debian $SUITE root filesystem at \$ROCM_CHROOT
(now: $ROOT) with these packages and their dependencies:
  ${PACKAGES[*]}
It takes about 3 minutes and 5.4 GB to build. Building is idempotent: a complete chroot
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

Environment: ROCM_CHROOT, ROCM_CHROOT_MIRROR, ROCM_CHROOT_BINDS,
ROCM_CHROOT_EXTRA_PACKAGES, ROCM_CHROOT_SUITE (default unstable).
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
        echo "chroot:          '"$ROOT"' ($(du -sh --one-file-system / 2>/dev/null | cut -f1))"
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
        dpkg-query -W -f "    \${Package} \${Version}\n" hipcc clang-21 libamdhip64-dev libamdhip64-6 libhiprtc6 libhiprtc-builtins6 \
            librocblas-dev librocblas4 libmiopen-dev libmiopen1 2>/dev/null || true
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
