# Rust test binaries on cgroup v2 (run.sh cargo_tests, V2VM_TESTBINS): each runs with
# --test-threads=1 --nocapture (and V2VM_TESTARGS), in the root cgroup or, with V2VM_TESTCG=NAME,
# in the populated non-root cgroup /sys/fs/cgroup/NAME (like a systemd session scope). One line
# per test: RESULT BIN::TEST PASS, FAIL or SKIP (with the test's "skipped:" reason).
. /tests/lib.sh
: > /tmp/summary
. /tests/cargo_tests.conf   # TESTBINS, TESTARGS, TESTCG, TESTTIMEOUT, written by run.sh
cp -a /v2files/. /          # the binaries and fixtures at their host paths (/tmp is a tmpfs)
if [ -n "$TESTCG" ]; then
  mkdir -p "$CG/$TESTCG" && echo $$ > "$CG/$TESTCG/cgroup.procs" || fail cargo-tests-cgroup "cannot enter $CG/$TESTCG"
fi
echo "cargo tests in cgroup $(cat /proc/self/cgroup), root subtree_control: $(cat $CG/cgroup.subtree_control)"
for bin in $TESTBINS; do
  name=$(basename "$bin" | sed 's/-[0-9a-f]\{16\}$//')
  echo "### $name ($bin $TESTARGS)"
  t0=$(cut -d' ' -f1 /proc/uptime)
  # shellcheck disable=SC2086 # TESTARGS is a word list
  timeout -k 10 "$TESTTIMEOUT" "$bin" --test-threads=1 --nocapture $TESTARGS < /dev/null > /tmp/t.out 2>&1
  rc=$?
  t1=$(cut -d' ' -f1 /proc/uptime)
  cat /tmp/t.out
  # "test NAME ... " starts a test; its own output may follow on that line and the next ones, up
  # to a line that ends with ok, FAILED or ignored (cargo's progress lines on stdout).
  awk -v bin="$name" '
    function done(v, why) { if (cur != "") { print "RESULT " bin "::" cur " " v (why == "" ? "" : " " why); cur = ""; skip = "" } }
    /^test .* \.\.\. / { cur = $2; skip = ""; sub(/^test [^ ]* \.\.\. /, "") }
    cur != "" && /skipped: / && skip == "" { skip = $0; sub(/^.*skipped: */, "", skip) }
    cur != "" && /(^|\.\.\. )ok$/ { done(skip == "" ? "PASS" : "SKIP", skip); next }
    cur != "" && /(^|\.\.\. )FAILED$/ { done("FAIL"); next }
    cur != "" && /(^|\.\.\. )ignored(, .*)?$/ { done("SKIP", "(ignored)"); next }
    END { done("FAIL", "(did not finish)") }
  ' /tmp/t.out > /tmp/t.res
  cat /tmp/t.res; sed 's/^RESULT //' /tmp/t.res >> /tmp/summary
  echo "BINARY $name exit $rc in $(awk "BEGIN { print $t1 - $t0 }") s: $(grep -c ' PASS' /tmp/t.res) pass, $(grep -c ' SKIP' /tmp/t.res) skip, $(grep -c ' FAIL' /tmp/t.res) fail"
  if [ $rc -ne 0 ] && ! grep -q ' FAIL' /tmp/t.res; then fail "$name" "exit $rc with no failed test (timeout $TESTTIMEOUT s is 124)"; fi
done
summary
echo "SKIP $(grep -c ' SKIP' /tmp/summary)"
cp /tmp/summary "$OUT/summary-cargo_tests${TESTCG:+-$TESTCG}.txt"
