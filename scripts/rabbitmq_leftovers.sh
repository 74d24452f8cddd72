#!/usr/bin/env bash
# Delete the RabbitMQ queues that interrupted test and bench runs left behind.
#
# Why: every test namespace declares quorum queues (a work queue, its delay
# tiers, a failed queue), and a run that is killed (Ctrl-C, a timeout, a
# crashed worker) never deletes its own. Each quorum queue keeps file handles
# open, and on a node with the common limit of 1,024 open files about 300 of
# them leave none for a new connection: connections then hang without an
# error (docs/drivers/rabbitmq.md), and every RabbitMQ test after that fails.
# CI calls this before the suite; run it by hand after an interrupted run.
#
# Only names of the tests' and the bench's namespaces are touched:
# `rq` and 11-12 letters or digits then a dot (tests/), and `rqcmp_`/`rqcmplat_`
# with 8 hex digits (bench/). Nothing else on the node is deleted.
set -uo pipefail

if ! command -v rabbitmqctl >/dev/null 2>&1; then
    exit 0
fi
names=$(timeout 120 rabbitmqctl list_queues name --quiet --no-table-headers 2>/dev/null \
    | grep -E '^(rq[a-z0-9]{11,12}\.|rqcmp(lat)?_[0-9a-f]{8}[._])' || true)
if [ -z "$names" ]; then
    exit 0
fi
count=$(printf '%s\n' "$names" | wc -l)
echo "rabbitmq_leftovers: deleting $count queues left by interrupted test or bench runs"
printf '%s\n' "$names" | while IFS= read -r name; do
    timeout 60 rabbitmqctl delete_queue "$name" --quiet </dev/null >/dev/null 2>&1 || true
done
