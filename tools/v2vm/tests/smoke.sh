# Smoke test of the harness: tact runs, cgroup2 is mounted, the out share is writable, vda exists.
echo "SMOKE: tact at $(command -v tact)"; tact --version 2>&1 || tact --help 2>&1 | head -3
cat /proc/self/cgroup; ls /sys/fs/cgroup | head -40
echo hi > /v2out/smoke.txt && echo "SMOKE: out writable"
cat /sys/block/vda/queue/scheduler
echo "RESULT smoke PASS"
