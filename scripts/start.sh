#!/usr/bin/env bash
# `npm start`: the whole stack on this machine's Postgres and Redis, in the foreground.
# Migrates (creating the database if missing), then runs ingest and WORKERS worker
# processes (default 2). Ctrl-C (or SIGTERM) stops them all gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."

export STRIPE_WEBHOOK_SECRET="${STRIPE_WEBHOOK_SECRET:-whsec_local_development_secret}"
WORKERS="${WORKERS:-2}"

bash scripts/ensure-services.sh >/dev/null
node --import tsx packages/shared/src/db/migrate-cli.ts

pids=()
node --import tsx apps/ingest/src/server.ts &
pids+=($!)
for _ in $(seq 1 "$WORKERS"); do
  node --import tsx apps/worker/src/main.ts &
  pids+=($!)
done

stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap stop INT TERM
echo "oncehook: ingest on :${PORT:-3000}, ${WORKERS} worker(s). Ctrl-C to stop." >&2
wait -n "${pids[@]}" || true
stop
