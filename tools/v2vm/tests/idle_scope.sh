# tact run --idle cpu started from a populated non-root cgroup (a login session's scope) against
# a foreground in a sibling cgroup (a service's), both on CPU 1: without --cgroup-parent tact can
# make no idle group there (v2 refuses the cpu controller below a cgroup with processes) and
# SCHED_IDLE alone is idle only inside the scope, so the job takes the scope's share; with
# --cgroup-parent $CG the idle group is the service's sibling, idle against it.
. /tests/lib.sh
[ -n "$V2VM_IN_ALL" ] || : > /tmp/summary
cat > /tmp/spin.sh <<'X'
exec timeout ${1:-12} sh -c 'while :; do :; done'
X
mkdir -p $CG/session.scope $CG/fg
echo $$ > $CG/session.scope/cgroup.procs
sh -c "echo \$\$ > $CG/fg/cgroup.procs && exec taskset -c 1 sh /tmp/spin.sh 45" & F=$!
sleep 1; f0=$(usage $CG/fg); sleep 5; f1=$(usage $CG/fg); echo "foreground alone: usage_usec=$((f1-f0)) in 5 s"
for args in "" "--cgroup-parent $CG"; do
  echo "### tact run --idle cpu $args, from session.scope"
  # shellcheck disable=SC2086 # args is a word list
  taskset -c 1 tact run --idle cpu $args -- sh /tmp/spin.sh 8 > /tmp/idle.out 2> /tmp/idle.err & T=$!
  sleep 2
  # The job's cgroup: the idle group where tact made one, else the session's scope.
  J=$(ls -d $CG/tact-*-idle 2>/dev/null | head -1); J=${J:-$CG/session.scope}
  f0=$(usage $CG/fg); s0=$(usage "$J"); sleep 5; f1=$(usage $CG/fg); s1=$(usage "$J")
  ft=$((f1-f0)); st=$((s1-s0)); tot=$((ft+st)); [ $tot -gt 0 ] || tot=1; pm=$(( ft*1000/tot ))
  echo "foreground usage_usec=$ft, the job's cgroup $J usage_usec=$st: foreground $pm permille"
  wait $T; cat /tmp/idle.err
  if [ -z "$args" ]; then
    note "idle-scope-sched-idle: without a parent the foreground got $pm permille (SCHED_IDLE alone)"
  else
    [ $pm -ge 950 ] && pass idle-scope-parent "foreground got $pm permille with the idle group under $CG" \
      || fail idle-scope-parent "foreground got only $pm permille with the idle group under $CG"
    ls -d $CG/tact-*-idle 2>/dev/null && fail idle-scope-cleanup "left $(ls -d $CG/tact-*-idle)" \
      || pass idle-scope-cleanup "tact-*-idle removed"
  fi
done
kill $F 2>/dev/null; wait $F
echo $$ > $CG/cgroup.procs; rmdir $CG/session.scope $CG/fg 2>/dev/null
[ -n "$V2VM_IN_ALL" ] || summary
