# Every section: paths.sh (0-3) and more.sh (4-7) with cpuset enabled at the root, then disk.sh
# and idle_scope.sh.
. /tests/lib.sh
echo "=== variant: cpuset enabled in the root's subtree_control ==="
bash /tests/paths.sh
bash /tests/more.sh
V2VM_IN_ALL=1 bash /tests/disk.sh
V2VM_IN_ALL=1 bash /tests/idle_scope.sh
summary
cp /tmp/summary $OUT/summary-all.txt
