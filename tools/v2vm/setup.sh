#!/bin/bash
# Usage (as root): tools/v2vm/setup.sh [KERNEL_PACKAGE_PATTERN]
#
# Prepares the cgroup2-only test VM of tools/v2vm on a Debian 12 (bookworm) host:
#  - installs qemu, busybox-static and the host tools that run.sh copies into the initramfs;
#  - downloads the newest Debian kernel package matching KERNEL_PACKAGE_PATTERN (a shell glob;
#    default 'linux-image-6.1.0-*-amd64-unsigned') with `apt-get download` and unpacks it with
#    `dpkg-deb -x` into the work dir. Nothing is installed into the host's /boot or /lib/modules.
# The work dir is ${TACT_V2VM_DIR:-/var/tmp/tact-v2vm}: kernels/KVER/root (the unpacked kernel),
# kver (the default KVER for run.sh), disk.img, logs/, out/, build.*/ (temporary).
# Another kernel: tools/v2vm/setup.sh 'linux-image-6.12.*+deb12-amd64-unsigned' (bookworm-backports
# in the apt sources), then KVER=6.12.NN+deb12-amd64 tools/v2vm/run.sh TEST.
set -euo pipefail
W=${TACT_V2VM_DIR:-/var/tmp/tact-v2vm}
DEFAULT_PAT='linux-image-6.1.0-*-amd64-unsigned'
PAT=${1:-$DEFAULT_PAT}
die() { echo "setup.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it calls apt-get install)"
command -v apt-get > /dev/null || die "needs apt-get (a Debian 12 host)"
export DEBIAN_FRONTEND=noninteractive

# qemu-system-x86: the VM (TCG; its 9p/virtfs share carries the results out).
# busybox-static: the initramfs' /init and base tools. cpio, gzip: the initramfs. bc: timing.
# dash coreutils procps iproute2 util-linux mawk bash libc-bin: copied from the host into the
# initramfs (run.sh, HOSTTOOLS=1), the tests use their taskset, timeout, ps, ip, awk.
# xz-utils: for kernels whose modules are .ko.xz.
[ "${SKIP_APT_UPDATE:-0}" = 1 ] || apt-get update -q
apt-get install -y qemu-system-x86 busybox-static cpio bc gzip xz-utils \
  dash bash coreutils procps iproute2 util-linux mawk libc-bin

# The newest kernel package matching the pattern, a glob whose * does not cross a '-' (so that
# the default matches linux-image-6.1.0-56-amd64-unsigned, not ...-56-rt-amd64-... or -cloud-).
# shellcheck disable=SC2016 # sed expressions, not shell ones
re=$(printf '%s' "$PAT" | sed -e 's/[].+^$()|[]/\\&/g' -e 's/\*/[^-]*/g' -e 's/?/[^-]/g')
PKG=$(apt-cache search --names-only "^$re\$" | cut -d' ' -f1 | sort -V | tail -1)
[ -n "$PKG" ] || die "no package matches '$PAT' (apt-cache search --names-only '^$re\$'); check the apt sources"
KVER=${PKG#linux-image-}; KVER=${KVER%-unsigned}
echo "setup.sh: kernel package $PKG (KVER $KVER) into $W/kernels/$KVER"

mkdir -p "$W/kernels" "$W/logs" "$W/out"
K=$W/kernels/$KVER
if [ -f "$K/root/boot/vmlinuz-$KVER" ]; then
  echo "setup.sh: $K/root already unpacked"
else
  rm -rf "$K"; mkdir -p "$K/deb"
  chown _apt "$K/deb" 2> /dev/null || true   # apt-get download runs as _apt where it can
  (cd "$K/deb" && apt-get download "$PKG")
  deb=$(ls "$K"/deb/*.deb)
  dpkg-deb -x "$deb" "$K/root.tmp"
  mv "$K/root.tmp" "$K/root"
  rm -f "$deb"
fi
[ -f "$K/root/boot/vmlinuz-$KVER" ] || die "$K/root/boot/vmlinuz-$KVER missing after unpacking $PKG"
[ -d "$K/root/lib/modules/$KVER/kernel" ] || die "$K/root/lib/modules/$KVER/kernel missing"
apt-cache policy "$PKG" | sed -n 's/^ *Candidate: //p' > "$K/version"

# run.sh's default kernel: the one of the default pattern, or the first one set up.
if [ "$PAT" = "$DEFAULT_PAT" ] || [ ! -f "$W/kver" ]; then echo "$KVER" > "$W/kver"; fi
[ -f "$W/disk.img" ] || truncate -s 512M "$W/disk.img"
echo "setup.sh: done. Kernel $KVER ($(cat "$K/version")), default KVER $(cat "$W/kver"), work dir $W"
echo "setup.sh: next: make build && tools/v2vm/run.sh all   (or tools/v2vm/run.sh smoke PATH/TO/tact)"
