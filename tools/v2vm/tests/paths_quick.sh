. /tests/lib.sh
echo "=== variant: cpuset enabled in the root's subtree_control ($(cat $CG/cgroup.subtree_control)), sections 0-2 only ==="
SKIP_TICKETS=1 bash /tests/paths.sh
summary
cp /tmp/summary $OUT/summary-paths_quick-$(uname -r).txt
