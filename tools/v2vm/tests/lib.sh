# helpers for the v2 test scripts (bash)
CG=/sys/fs/cgroup
OUT=/v2out   # the 9p share (run.sh: $TACT_V2VM_DIR/out on the host)
pass() { echo "RESULT $1 PASS ${*:2}"; echo "$1 PASS ${*:2}" >> /tmp/summary; }
fail() { echo "RESULT $1 FAIL ${*:2}"; echo "$1 FAIL ${*:2}" >> /tmp/summary; }
note() { echo "NOTE: $*"; }
usage() { sed -n 's/^usage_usec //p' "$1/cpu.stat"; }          # cgroup cpu usage (us)
# utime+stime (ticks) of a process and all its descendants alive now (spin.sh's loop runs in a
# child of timeout, so the pid started alone reads 0). Builtins only: forks are slow
# under TCG, and a slow sample can land after the spinners' timeout.
treetime() { TT=0; _treetime "$1"; echo $TT; }
_treetime() { local f k c pst; read -r -a pst < /proc/$1/stat 2>/dev/null && TT=$((TT + pst[13] + pst[14]))
  for f in "/proc/$1"/task/*/children; do read -r -a k < "$f" 2>/dev/null; for c in "${k[@]}"; do _treetime $c; done; done; }
show() { for f in "$@"; do [ -e "$f" ] && echo "  $f = $(tr '\n' ' ' < "$f")" || echo "  $f (absent)"; done; }
summary() { echo "===== SUMMARY ====="; cat /tmp/summary; echo "PASS $(grep -c ' PASS' /tmp/summary) FAIL $(grep -c ' FAIL' /tmp/summary)"; }
# pids whose command line (spaces for NULs) starts with PATTERN (a grep -E regex)
pids_matching() { for d in /proc/[0-9]*; do c=$(tr '\0' ' ' < $d/cmdline 2>/dev/null) || continue; echo "$c" | grep -qE "$1" && echo ${d#/proc/}; done; }
