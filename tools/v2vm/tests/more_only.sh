. /tests/lib.sh
: > /tmp/summary
cat > /tmp/spin.sh <<'X'
exec timeout ${1:-12} sh -c 'while :; do :; done'
X
bash /tests/more.sh
summary; cp /tmp/summary $OUT/summary-more.txt
