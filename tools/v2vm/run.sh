#!/bin/bash
# Usage: tools/v2vm/run.sh TEST [TACT_BINARY]
#   TEST: a script in tools/v2vm/tests (all, paths, paths_quick, more_only, nocpuset, disk, smoke,
#   cargo_tests).
#   TACT_BINARY: default target/release/tact of this repository (`make build`).
#   cargo_tests: V2VM_TESTBINS="BIN..." (test binaries of `cargo test --release --no-run`), each
#   copied to its own path, with TACT_BINARY where they expect CARGO_BIN_EXE_tact (TARGET/tact
#   for TARGET/release/deps/BIN... of `--release`: the TARGET/PROFILE/tact next to deps), and this
#   repository's crates/*/tests/fixtures at their paths; V2VM_TESTARGS (test name filters and
#   options), V2VM_TESTCG (run them in that non-root cgroup), V2VM_TESTTIMEOUT (s per binary, 1200).
# Builds an initramfs (busybox-static, the tact binary and its libraries, host dash/coreutils/
# procps/iproute2, tests/*.sh, the kernel modules it needs), boots the Debian kernel unpacked by
# setup.sh under qemu (TCG) with cgroup2 as the only hierarchy (cgroup_no_v1=all), runs
# tests/TEST.sh inside and powers off. The serial console goes to the terminal and to
# $TACT_V2VM_DIR/logs/TEST-KVER-TIME.log; the tests' summaries to $TACT_V2VM_DIR/out (a 9p
# share, /v2out inside). Exit status 0 when the test ran to its end and no RESULT line says FAIL.
# Environment: TACT_V2VM_DIR (default /var/tmp/tact-v2vm), KVER (a kernel unpacked by setup.sh;
# default the one in $TACT_V2VM_DIR/kver), HOSTTOOLS=0 (busybox only), MEM (2G), SMP (2),
# ACCEL (default "-accel tcg,thread=multi"), EXTRA_APPEND (more kernel command line).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
W=${TACT_V2VM_DIR:-/var/tmp/tact-v2vm}
die() { echo "run.sh: $*" >&2; exit 2; }

TEST=${1:-}
if [ -z "$TEST" ] || [ "$TEST" = lib ] || [ "$TEST" = more ] || [ ! -f "$HERE/tests/$TEST.sh" ]; then
  echo "usage: $0 TEST [TACT_BINARY]" >&2
  # shellcheck disable=SC2012 # our own file names
  echo "  TEST: one of: $(cd "$HERE/tests" && ls -- *.sh | sed 's/\.sh$//' | grep -vxE "lib|more" | tr '\n' ' ')" >&2
  exit 2
fi
TACT=${2:-$REPO/target/release/tact}
{ [ -f "$TACT" ] && [ -x "$TACT" ]; } || die "tact binary '$TACT' missing or not executable: run 'make build' (or give its path)"

[ -d "$W" ] || die "work dir $W missing: run tools/v2vm/setup.sh as root first (TACT_V2VM_DIR=$W)"
if [ -z "${KVER:-}" ]; then
  [ -f "$W/kver" ] || die "$W/kver missing: run tools/v2vm/setup.sh as root first"
  KVER=$(cat "$W/kver")
fi
KROOT=$W/kernels/$KVER/root
# shellcheck disable=SC2012 # directory names made by setup.sh
[ -f "$KROOT/boot/vmlinuz-$KVER" ] || die "kernel $KVER not in $W/kernels (have: $(ls "$W/kernels" 2>/dev/null | tr '\n' ' ')): run tools/v2vm/setup.sh"
for t in qemu-system-x86_64 busybox cpio gzip bc ldd; do
  command -v "$t" > /dev/null || die "$t not found: run tools/v2vm/setup.sh as root"
done
mkdir -p "$W/logs" "$W/out" || die "cannot write to $W (created by setup.sh as root; run as root or chown it)"
KMOD=$KROOT/lib/modules/$KVER

# Modules, in load order; those a kernel has built in (or lacks) are skipped. The 6.1 kernel has
# virtio and 9p as modules; 6.12 has virtio built in and fscache folded into netfs.
MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache 9pnet
  9pnet_virtio 9p loop bfq virtio_blk inet_diag tcp_diag udp_diag"

B=$(mktemp -d "$W/build.XXXXXX")
trap 'rm -rf "$B"' EXIT
R=$B/root
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,proc,sys,dev,tmp,root,modules,tests}
copy_bin() { # copy a host binary (to $2, default the same path) and the libraries it links
  local f=$1 dst=${2:-$1} l
  mkdir -p "$R/$(dirname "$dst")"; cp -L "$f" "$R/$dst"
  { ldd "$f" 2>/dev/null || true; } | { grep -o '/[^ ]*' || true; } | while read -r l; do
    mkdir -p "$R/$(dirname "$l")"; cp -Ln "$l" "$R/$l" 2>/dev/null || true
  done
}
BUSYBOX=$(command -v busybox)
copy_bin "$BUSYBOX" /bin/busybox   # with its libraries, if it is not busybox-static
for a in $("$BUSYBOX" --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
# Real tools where busybox lacks them or differs (bash runs the tests; taskset, timeout, chrt).
for b in bash sleep timeout nice taskset chrt env cat true false yes dd stat; do
  p=$(type -P "$b") || continue; rm -f "$R/bin/$b"; copy_bin "$p" "/bin/$b"
done
ln -sf bash "$R/bin/sh.bash"
# HOSTTOOLS=1 (default): the host's dash as /bin/sh, coreutils, procps, iproute2, mawk, so that
# the tests see the same tools as on a host. HOSTTOOLS=0: busybox only (plus the list above).
if [ "${HOSTTOOLS:-1}" = 1 ]; then
  HOSTPKGS=(coreutils procps iproute2 mawk)
  for f in $(dpkg -L "${HOSTPKGS[@]}" 2>/dev/null | grep -E '/s?bin/[^/]+$'); do
    { [ -f "$f" ] && [ ! -L "$f" ]; } || continue
    b=$(basename "$f"); rm -f "$R/bin/$b"; copy_bin "$f" "/bin/$b"
  done
  for f in $(dpkg -L "${HOSTPKGS[@]}" 2>/dev/null | grep -E '/s?bin/[^/]+$'); do
    [ -L "$f" ] || continue
    b=$(basename "$f"); t=$(basename "$(readlink -f "$f")")
    if [ "$b" != "$t" ] && [ -e "$R/bin/$t" ]; then ln -sf "$t" "$R/bin/$b"; fi
  done
  [ -e "$R/bin/mawk" ] && ln -sf mawk "$R/bin/awk"
  rm -f "$R/bin/sh"; copy_bin "$(type -P dash)" /bin/dash; ln -sf dash "$R/bin/sh"
fi
copy_bin "$TACT" /bin/tact
if [ "$TEST" = cargo_tests ]; then
  [ -n "${V2VM_TESTBINS:-}" ] || die "cargo_tests: set V2VM_TESTBINS to the test binaries' paths"
  # Files at their host paths go below /v2files, which cargo_tests.sh copies to / (/init mounts
  # a tmpfs on /tmp, where target directories often are).
  V=/v2files
  for t in $V2VM_TESTBINS; do
    { [ -f "$t" ] && [ -x "$t" ]; } || die "test binary '$t' missing or not executable"
    t=$(readlink -f "$t"); copy_bin "$t" "$V$t"
    # env!("CARGO_BIN_EXE_tact") is PROFILE_DIR/tact, PROFILE_DIR the parent of deps.
    exe=$(dirname "$(dirname "$t")")/tact
    if grep -qaF "$exe" "$t"; then
      [ -e "$R$V$exe" ] || copy_bin "$TACT" "$V$exe"
    else
      echo "run.sh: note: $t does not name $exe: no tact put there for it"
    fi
    # CARGO_TARGET_TMPDIR: TARGET/tmp.
    mkdir -p "$R$V/$(dirname "$(dirname "$(dirname "$t")")")/tmp"
  done
  for d in "$REPO"/crates/*/tests/fixtures; do mkdir -p "$R$V$d"; cp -r "$d/." "$R$V$d/"; done
  # Tools the tests name by absolute path (AS_NOBODY's setpriv, TASKSET).
  for b in setpriv taskset; do p=$(type -P "$b") && copy_bin "$p" "/usr/bin/$b"; done
  { echo "TESTBINS='$(for t in $V2VM_TESTBINS; do readlink -f "$t"; done | tr '\n' ' ')'"
    echo "TESTARGS='${V2VM_TESTARGS:-}' TESTCG='${V2VM_TESTCG:-}' TESTTIMEOUT='${V2VM_TESTTIMEOUT:-1200}'"
  } > "$R/tests/cargo_tests.conf"
fi
copy_bin /lib64/ld-linux-x86-64.so.2
echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >> "$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
: > "$R/modules.order"
for m in $MODS; do
  f=$(find "$KMOD/kernel" \( -name "$m.ko" -o -name "$m.ko.xz" \) | head -1)
  if [ -z "$f" ]; then
    grep -q "/$m\.ko" "$KMOD/modules.builtin" 2>/dev/null || echo "run.sh: note: module $m neither in $KMOD nor built in"
    continue
  fi
  case $f in
    *.xz) xz -dc "$f" > "$R/modules/$m.ko" ;;
    *) cp "$f" "$R/modules/$m.ko" ;;
  esac
  echo "$m" >> "$R/modules.order"
done
cp "$HERE/init" "$R/init"; chmod +x "$R/init"
cp "$HERE"/tests/*.sh "$R/tests/"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$B/initrd.gz"
# A scratch disk (vda) for the io tests: only read, so concurrent runs can share it.
[ -f "$W/disk.img" ] || truncate -s 512M "$W/disk.img"

LOG=$W/logs/$TEST-$KVER-$(date +%Y%m%d-%H%M%S).log
# TCG by default: KVM would be much faster where it works (ACCEL="-enable-kvm"), but the harness
# was written on a host where it did not (a PVM guest without vmx/svm).
ACCEL=${ACCEL:--accel tcg,thread=multi}
echo "run.sh: test $TEST, tact $TACT, kernel $KVER, accel '$ACCEL', log $LOG"
T0=$(date +%s.%N)
# shellcheck disable=SC2086 # ACCEL and EXTRA_APPEND are word lists
qemu-system-x86_64 $ACCEL -nographic -no-reboot -m "${MEM:-2G}" -smp "${SMP:-2}" \
  -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$B/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 cgroup_no_v1=all v2test=$TEST ${EXTRA_APPEND:-}" \
  -drive "file=$W/disk.img,if=virtio,format=raw,readonly=on" \
  -virtfs "local,path=$W/out,mount_tag=v2out,security_model=none" \
  < /dev/null 2>&1 | tee "$LOG"
T1=$(date +%s.%N)
echo "run.sh: wall time $(echo "$T1 - $T0" | bc) s (accel '$ACCEL')" | tee -a "$LOG"

# Verdict: the test must have reached its end (init prints "V2VM: test exit") with no FAIL.
tr -d '\r' < "$LOG" > "$LOG.tmp" && mv "$LOG.tmp" "$LOG"
npass=$(grep -c '^RESULT [^ ]* PASS' "$LOG" || true)
nfail=$(grep -c '^RESULT [^ ]* FAIL' "$LOG" || true)
nskip=$(grep -c '^RESULT [^ ]* SKIP' "$LOG" || true)
if ! grep -q '^V2VM: test exit' "$LOG"; then
  echo "run.sh: $TEST did not finish (no 'V2VM: test exit' in $LOG); $npass PASS, $nfail FAIL so far" >&2
  exit 1
fi
skips=""; [ "$nskip" -eq 0 ] || skips=", $nskip SKIP"
echo "run.sh: $TEST: $npass PASS, $nfail FAIL$skips (log $LOG)"
grep '^RESULT [^ ]* FAIL' "$LOG" >&2 && exit 1
exit 0
