#!/usr/bin/env bash
# For CI (.ci/run): starts this machine's shared Postgres and Redis if they are not answering,
# and checks the tools the fault tests need. Never stops or restarts a running one (fault tests
# start servers of their own on other ports). `npm start` does not use it (scripts/start.ts).
set -euo pipefail

if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  echo "== starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "== starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
echo "redis: $(redis-cli -h 127.0.0.1 -p 6379 ping)"

# Fault tests create their own clusters with pg_createcluster/pg_ctlcluster and their own
# redis-server: check the tools are there so a failure says so up front.
for tool in pg_createcluster pg_ctlcluster pg_dropcluster redis-server; do
  command -v "$tool" >/dev/null || { echo "missing $tool, which the fault tests need (Debian: postgresql-common / redis-server)" >&2; exit 1; }
done
