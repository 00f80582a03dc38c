# Disk tickets on v2: io.weight (iocost) and the bfq case. Two O_DIRECT readers of vda, disk 100:300.
. /tests/lib.sh
# run alone it starts its own summary; from all.sh (V2VM_IN_ALL=1) it adds to all's
[ -n "$V2VM_IN_ALL" ] || : > /tmp/summary
DEV=$(cat /sys/block/vda/dev); echo "vda is $DEV"
cat > /tmp/d.toml <<'X'
[[job]]
name = "A"
command = "exec timeout 10 sh -c 'while :; do dd if=/dev/vda of=/dev/null bs=64k count=2000 iflag=direct 2>/dev/null; done'"
funding = [{ from = "base", disk = 100, cpu = 100 }]
[[job]]
name = "B"
command = "exec timeout 10 sh -c 'while :; do dd if=/dev/vda of=/dev/null bs=64k skip=3000 count=2000 iflag=direct 2>/dev/null; done'"
funding = [{ from = "base", disk = 300, cpu = 100 }]
X
rb() { sed -n "s/^$DEV rbytes=\([0-9]*\).*/\1/p" $1/io.stat; }
run_disk() { # $1 label
  echo "--- $1: scheduler $(cat /sys/block/vda/queue/scheduler); io.cost.qos: $(cat $CG/io.cost.qos)"
  tact tickets run --backend cgroup /tmp/d.toml > /tmp/d.out 2> /tmp/d.err & T=$!
  sleep 2; D=$(ls -d $CG/tact-tickets-* | head -1)
  show $D/job0/io.weight $D/job1/io.weight $D/job0/io.bfq.weight $D/job1/io.bfq.weight
  a0=$(rb $D/job0); b0=$(rb $D/job1); sleep 6; a=$(( $(rb $D/job0)-a0 )); b=$(( $(rb $D/job1)-b0 ))
  echo "DISK $1 bytes over 6s: A=$a B=$b  B fraction permille $((b*1000/(a+b+1)))"
  eval "DISK_$1=$((b*1000/(a+b+1)))"
  wait $T; cat /tmp/d.err; grep -E '^[AB] ' /tmp/d.out
}
echo mq-deadline > /sys/block/vda/queue/scheduler
run_disk none
echo "$DEV enable=1" > $CG/io.cost.qos
run_disk iocost
echo "$DEV enable=0" > $CG/io.cost.qos
echo bfq > /sys/block/vda/queue/scheduler
run_disk bfq
echo "B's part (weights 1:3, ideal 750): no control $DISK_none, iocost $DISK_iocost, bfq $DISK_bfq"
[ $DISK_iocost -ge 650 ] && pass disk-iocost "B got $DISK_iocost permille" || fail disk-iocost "B got $DISK_iocost permille (no control: $DISK_none)"
[ $DISK_bfq -ge 650 ] && pass disk-bfq "B got $DISK_bfq permille" || fail disk-bfq "B got $DISK_bfq permille: tact wrote io.weight, bfq reads io.bfq.weight"
[ -n "$V2VM_IN_ALL" ] || { summary; cp /tmp/summary $OUT/summary-disk.txt; }
