# tact's cgroup v2 paths, each with a check of the files tact writes and a measured effect.
. /tests/lib.sh
: > /tmp/summary
cat > /tmp/spin.sh <<'X'
exec timeout ${1:-12} sh -c 'while :; do :; done'
X
echo "### 0. control: two busy loops on CPU 1, no tact (how TCG splits 1:1)"
taskset -c 1 sh /tmp/spin.sh 6 & a=$!; taskset -c 1 sh /tmp/spin.sh 6 & b=$!
sleep 1; a0=$(treetime $a) b0=$(treetime $b); sleep 4; a1=$(treetime $a) b1=$(treetime $b)
echo "control ticks a=$((a1-a0)) b=$((b1-b0))"; wait $a $b

echo "### 1. tact share --backend cgroup 1:3 on one CPU (cpu.weight)"
taskset -c 1 tact share --backend cgroup --json-log /tmp/share.jsonl \
  --job "1=sh /tmp/spin.sh 14" --job "3=sh /tmp/spin.sh 14" > /tmp/share.out 2> /tmp/share.err & T=$!
sleep 3
D=$(ls -d $CG/tact-share-* 2>/dev/null | head -1)
if [ -z "$D" ]; then fail share-cgroup "no tact-share-* dir"; cat /tmp/share.err; else
  echo "dir $D"; find $D -maxdepth 1 -type d; show $D/cgroup.subtree_control $CG/cgroup.subtree_control
  J=$(find $D -mindepth 1 -maxdepth 1 -type d | sort)
  for j in $J; do show $j/cpu.weight $j/cgroup.procs; for p in $(cat $j/cgroup.procs); do echo "  pid $p Cpus_allowed_list: $(sed -n "s/^Cpus_allowed_list:\t//p" /proc/$p/status)"; done; done
  declare -A u0; for j in $J; do u0[$j]=$(usage $j); done; sleep 10
  ws=""; us=""; tot=0; for j in $J; do d=$(( $(usage $j) - ${u0[$j]} )); tot=$((tot+d)); us="$us $d"; ws="$ws $(cat $j/cpu.weight)"; done
  split=""; for x in $us; do split="$split $(( x*1000/tot ))"; done
  echo "weights:$ws usage_usec over 10s:$us permille:$split"
  set -- $ws; w1=$1; w2=$2; set -- $split
  if [ $((w2)) -eq $((3*w1)) ] || [ $((w1)) -eq $((3*w2)) ]; then
    lo=$(( $1<$2 ? $1 : $2 )); if [ $lo -ge 200 ] && [ $lo -le 300 ]; then pass share-cgroup "weights$ws split(permille)$split"; else fail share-cgroup "weights$ws but split$split"; fi
  else fail share-cgroup "weights$ws not 1:3"; fi
fi
wait $T; echo "tact share exit $?"; cat /tmp/share.err /tmp/share.out
ls -d $CG/tact-share-* 2>/dev/null && fail share-cleanup "left $(ls -d $CG/tact-share-*)" || pass share-cleanup "tact-share-* removed"
show $CG/cgroup.subtree_control; tail -2 /tmp/share.jsonl

echo "### 2. tact run --idle cpu (cpu.idle group)"
taskset -c 1 tact run --idle cpu --json-log /tmp/idle.jsonl -- sh /tmp/spin.sh 12 > /tmp/idle.out 2> /tmp/idle.err & T=$!
sleep 2
D=$(ls -d $CG/tact-*-idle 2>/dev/null | head -1)
if [ -z "$D" ]; then fail idle-cgroup "no tact-*-idle"; cat /tmp/idle.err; else
  find $D -type d; show $D/cpu.idle $D/cgroup.procs $D/job/cgroup.procs $D/job/cpu.idle $D/cgroup.subtree_control
  P=$(cat $D/job/cgroup.procs | head -1); for p in $(cat $D/job/cgroup.procs); do echo "  pid $p Cpus_allowed_list: $(sed -n "s/^Cpus_allowed_list:\t//p" /proc/$p/status)"; done; echo "job pids: $(cat $D/job/cgroup.procs | tr '\n' ' ') ; cmd of first: $(tr '\0' ' ' < /proc/$P/cmdline); policy: $(awk '{print $41}' /proc/$P/stat)"
  [ "$(cat $D/cpu.idle)" = 1 ] && [ -n "$P" ] && pass idle-cgroup "cpu.idle=1 in $D, job pids in $D/job" || fail idle-cgroup "cpu.idle=$(cat $D/cpu.idle) pids=$P"
  # foreground busy loop beside it on CPU 1, in its own cgroup fg (a sibling of tact's group at
  # the root), so that its CPU time is the cgroup's usage_usec: the loop runs in a child of
  # spin.sh's timeout, and the process started here (timeout) uses no CPU itself.
  mkdir -p $CG/fg
  sh -c "echo \$\$ > $CG/fg/cgroup.procs && exec taskset -c 1 sh /tmp/spin.sh 7" & F=$!; sleep 1
  show $CG/fg/cgroup.procs
  f0=$(usage $CG/fg); i0=$(usage $D); sleep 5; f1=$(usage $CG/fg); i1=$(usage $D)
  ft=$((f1-f0)); it=$((i1-i0)); echo "foreground (cgroup fg) usage_usec=$ft idle-group usage_usec=$it"
  tot=$((ft+it)); [ $tot -gt 0 ] || tot=1
  pm=$(( ft*1000/tot )); [ $pm -ge 950 ] && pass idle-effect "foreground got ${pm} permille of CPU 1" || fail idle-effect "foreground got only ${pm} permille"
  wait $F; rmdir $CG/fg 2>/dev/null || note "cgroup fg not removed: $(cat $CG/fg/cgroup.procs 2>/dev/null | tr '\n' ' ')"
fi
wait $T; echo "tact run exit $?"; cat /tmp/idle.err /tmp/idle.out
ls -d $CG/tact-*-idle 2>/dev/null && fail idle-cleanup "left $(ls -d $CG/tact-*-idle)" || pass idle-cleanup "tact-*-idle removed"
head -1 /tmp/idle.jsonl | cut -c1-400; show $CG/cgroup.subtree_control

[ -n "$SKIP_TICKETS" ] && return 0 2>/dev/null || [ -n "$SKIP_TICKETS" ] && exit 0
echo "### 3. tact tickets run (cpu.weight, memory.min/low, io weight, arena memory.max)"
# A: hard 10% of base cpu (100 of 1000), so R(A)=100, R(B)=900 (B's soft tickets get the rest): weights 1:9.
# A reads 40 MiB of vda and keeps the device open (the block device's page cache is dropped at its
# last close); B then streams 900 MiB through the 96 MiB arena. MEMA is A's memory funding.
tickets_mem() {  # $1 = label, $2 = A's extra funding fields
cat > /tmp/t.toml <<X
[memory]
arena = "96MiB"
[[job]]
name = "A"
command = "exec 3</dev/vda; dd if=/dev/vda of=/dev/null bs=1M count=40 2>/dev/null; exec sh /tmp/spin.sh 16"
funding = [{ from = "base", cpu = 100, disk = 100$2, hard = true }]
[[job]]
name = "B"
command = "sleep 4; exec 3</dev/vda; for i in 1 2 3; do dd if=/dev/vda of=/dev/null bs=1M skip=100 count=300 2>/dev/null; done; exec sh /tmp/spin.sh 6"
funding = [{ from = "base", cpu = 300, disk = 300, mem = "16MiB" }]
X
taskset -c 1 tact tickets run --backend cgroup --json-log /tmp/tk.jsonl /tmp/t.toml > /tmp/tk.out 2> /tmp/tk.err & T=$!
sleep 3
D=$(ls -d $CG/tact-tickets-* 2>/dev/null | head -1)
if [ -z "$D" ]; then fail tickets-cgroup-$1 "no tact-tickets-*"; cat /tmp/tk.err; else
  find $D -type d; show $D/memory.max $D/memory.min $D/memory.low $D/cgroup.subtree_control
  # A child's protection counts only up to its parent's: the top carries the sum of the jobs'.
  tmin=$(cat $D/memory.min) jmin=$(( $(cat $D/job0/memory.min) + $(cat $D/job1/memory.min) ))
  [ "$tmin" = "$jmin" ] && pass tickets-memory.min-top-$1 "top $tmin = sum of the jobs' $jmin" || fail tickets-memory.min-top-$1 "top $tmin, jobs' sum $jmin"
  for j in job0 job1; do show $D/$j/cpu.weight $D/$j/memory.min $D/$j/memory.low $D/$j/io.weight $D/$j/io.bfq.weight $D/$j/memory.current $D/$j/cgroup.procs; done
  wa=$(cat $D/job0/cpu.weight) wb=$(cat $D/job1/cpu.weight)
  [ -n "$wa" ] && [ $((wb)) -ge $((9*wa-wa/10)) ] && [ $((wb)) -le $((9*wa+wa/10)) ] && pass tickets-cpu.weight-$1 "A=$wa B=$wb (R 100:900)" || fail tickets-cpu.weight-$1 "A=$wa B=$wb (want 1:9)"
  iw=$(cat $D/job1/io.weight); echo "$iw" | grep -q 'default [0-9]' && pass tickets-io.weight-$1 "A: $(cat $D/job0/io.weight) B: $iw" || fail tickets-io.weight-$1 "$iw"
  before=$(cat $D/job0/memory.current); echo "A memory.current before B's reads: $before"
  sleep 9
  echo "after B read 900MiB through the 96MiB arena:"; show $D/memory.current $D/job0/memory.current $D/job1/memory.current $D/job0/memory.events $D/job1/memory.events
  grep -E '^(file|anon) ' $D/job0/memory.stat | tr '\n' ' '; echo
  after=$(cat $D/job0/memory.current); echo "MEMRESULT $1 A before=$before after=$after min=$(cat $D/job0/memory.min)"
  eval "MEM_$1_after=$after MEM_$1_before=$before"
fi
wait $T; echo "tickets exit $?"; cat /tmp/tk.err /tmp/tk.out
ls -d $CG/tact-tickets-* 2>/dev/null && fail tickets-cleanup-$1 "left" || pass tickets-cleanup-$1 "tact-tickets-* removed"
tail -1 /tmp/tk.jsonl | cut -c1-1500; echo
}
tickets_mem floor ', mem = "48MiB"'
mn=$(cat $CG/tact-tickets-*/job0/memory.min 2>/dev/null)
tickets_mem nofloor ''
echo "A's page cache after B's streaming: with memory.min 48MiB: $MEM_floor_after of $MEM_floor_before; without: $MEM_nofloor_after of $MEM_nofloor_before"
[ -n "$MEM_floor_after" ] && [ $((MEM_floor_after)) -ge $((MEM_floor_before*9/10)) ] && [ $((MEM_nofloor_after)) -lt $((MEM_nofloor_before/2)) ] \
  && pass tickets-memory.min-effect "A kept $MEM_floor_after of $MEM_floor_before B with the floor, $MEM_nofloor_after of $MEM_nofloor_before without" \
  || fail tickets-memory.min-effect "floor: $MEM_floor_after/$MEM_floor_before nofloor: $MEM_nofloor_after/$MEM_nofloor_before"
