. /tests/lib.sh
echo "-cpuset" > $CG/cgroup.subtree_control; echo "=== variant: no cpuset in the root's subtree_control: $(cat $CG/cgroup.subtree_control) ==="
SKIP_TICKETS=1 bash /tests/paths.sh
summary
cp /tmp/summary $OUT/summary-nocpuset.txt
