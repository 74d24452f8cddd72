#!/usr/bin/env bash
# The test suite, with its one long test running beside the rest.
#
# Why: the scheduler's acceptance test (tests/faults/test_scheduler_acceptance.py)
# runs three scheduler processes per store for about two minutes, one tick a
# second, and spends nearly all of that waiting. Run in line, it adds its two
# minutes to every CI run; run beside the others, it costs a few percent of
# one core. Its output is printed after the main run, and the script fails if
# either run failed.
#
# The rest runs in RAINIER_QUEUE_TEST_PROCESSES (3) pytest-xdist processes, a
# test file to a process (`--dist loadfile`, so a file's module fixtures, such as
# a TLS server, start once). Most tests wait on servers, leases and processes
# rather than compute, so three processes on two cores keep both busy: the whole
# suite took 18 minutes in line and 7 beside itself on the same loaded machine.
# Files go out longest first (tests/slowest_first.py orders the collection, and
# --no-loadscope-reorder keeps pytest-xdist from putting files with the most tests
# first instead), so no process starts a file of minutes when the others are done.
# Tests share nothing but the servers, and each works in a namespace of its own.
#
# Usage: scripts/pytest.sh [pytest arguments]   (with arguments, pytest runs them
# as given, in one process unless they say `-n N`, the acceptance test in line
# if pytest selects it)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}

if [ "$#" -gt 0 ]; then
    exec "$BIN/pytest" "$@"
fi

log=$(mktemp -t rq-acceptance.XXXXXX.log)
"$BIN/pytest" -m scheduler_acceptance -p no:cacheprovider >"$log" 2>&1 &
beside=$!
trap 'kill "$beside" 2>/dev/null; rm -f "$log"' INT TERM

"$BIN/pytest" -n "${RAINIER_QUEUE_TEST_PROCESSES:-3}" --dist loadfile --no-loadscope-reorder \
    -m "not scheduler_acceptance"
main=$?

wait "$beside"
acceptance=$?
echo
echo "---- the scheduler acceptance test, run beside the rest (exit $acceptance) ----"
cat "$log"
rm -f "$log"
# Exit 5 is "no tests collected": the marker matched nothing, which is no failure.
if [ "$acceptance" -eq 5 ]; then acceptance=0; fi
if [ "$main" -ne 0 ]; then exit "$main"; fi
exit "$acceptance"
