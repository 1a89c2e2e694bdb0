#!/usr/bin/env bash
# run.sh TARGET PACKAGE FUZZTIME [go test flags...]
#
# Runs one fuzz target for FUZZTIME. A failure fails the run, with one
# exception: Go 1.26's fuzzing coordinator can end a -fuzztime run with
# "context deadline exceeded" when the deadline fires while a worker is still
# mid-call (golang/go#75804, fixed in Go 1.27). That ending found nothing: no
# failing input is written, and the fuzzer had run its whole time. It is
# reported and counted as a pass. Any other failure, or any new file under
# testdata/fuzz/TARGET, fails.
set -euo pipefail
target=$1 pkg=$2 fuzztime=$3
shift 3
corpus="$pkg/testdata/fuzz/$target"
before=$(ls "$corpus" 2>/dev/null | sort || true)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
${GO:-go} test -run XXX -fuzz "^${target}\$" -fuzztime "$fuzztime" "$@" "$pkg" 2>&1 | tee "$log" || rc=$?
[ "$rc" -eq 0 ] && exit 0
after=$(ls "$corpus" 2>/dev/null | sort || true)
if [ "$before" = "$after" ] && ! grep -q 'Failing input written to' "$log" &&
	[ "$(grep -A1 -- "^--- FAIL: $target " "$log" | tail -n1 | sed 's/^ *//')" = "context deadline exceeded" ] &&
	[ "$(grep -c -- '^--- FAIL' "$log")" -eq 1 ]; then
	echo "fuzz: $target ended on Go's -fuzztime shutdown race (golang/go#75804); no failing input was found"
	exit 0
fi
exit "$rc"
