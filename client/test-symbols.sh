#!/bin/sh
# test-symbols.sh LIB SYMFILE - the shared library exports exactly the
# functions listed in the version script, each declared in the public header
# and documented by a man page.
set -eu
lib=$1
sym=$2
dir=$(dirname "$sym")
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort)
listed=$(sed -n 's/^[[:space:]]*\(brokerd_[a-z_]*\);/\1/p' "$sym" | sort)
if [ "$exported" != "$listed" ]; then
	echo "exported symbols differ from $sym:"
	printf '%s\n' "$exported" > /tmp/test-symbols.$$.a
	printf '%s\n' "$listed" > /tmp/test-symbols.$$.b
	diff /tmp/test-symbols.$$.a /tmp/test-symbols.$$.b || true
	rm -f /tmp/test-symbols.$$.a /tmp/test-symbols.$$.b
	exit 1
fi
rc=0
for s in $listed; do
	grep -q "\b$s(" "$dir/include/brokerd/brokerd.h" || { echo "$s: not in brokerd.h"; rc=1; }
	[ -f "$dir/man/$s.3" ] || { echo "$s: no man page man/$s.3"; rc=1; }
done
[ $rc -eq 0 ] && echo "$(echo "$listed" | wc -l) symbols exported, declared and documented"
exit $rc
