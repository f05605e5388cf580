#!/usr/bin/env bash
# `npm start`: the whole stack on this machine's Postgres and Redis, in the foreground.
# Migrates (creating the database if missing), then runs the sandbox effect APIs (:4010),
# ingest and WORKERS worker processes (default 2). Ctrl-C (or SIGTERM) stops them all gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."

export STRIPE_WEBHOOK_SECRET="${STRIPE_WEBHOOK_SECRET:-whsec_local_development_secret}"
WORKERS="${WORKERS:-2}"
export SANDBOX_PORT="${SANDBOX_PORT:-4010}"
# The example shop is loaded only because this script names it.
export ONCEHOOK_HANDLERS="${ONCEHOOK_HANDLERS:-examples/shop}"
export SHOP_PAYMENT_API_URL="${SHOP_PAYMENT_API_URL:-http://127.0.0.1:${SANDBOX_PORT}/payment}"
export SHOP_EMAIL_API_URL="${SHOP_EMAIL_API_URL:-http://127.0.0.1:${SANDBOX_PORT}/email}"
export SHOP_FULFILMENT_API_URL="${SHOP_FULFILMENT_API_URL:-http://127.0.0.1:${SANDBOX_PORT}/fulfilment}"

bash scripts/ensure-services.sh >/dev/null
node --import tsx packages/shared/src/db/migrate-cli.ts --set shop --dir examples/shop/migrations

pids=()
node --import tsx apps/sandbox/src/server.ts &
pids+=($!)
node --import tsx apps/ingest/src/server.ts &
pids+=($!)
for i in $(seq 1 "$WORKERS"); do
  # Each worker serves its /metrics on its own port: 9464, 9465, ...
  METRICS_PORT=$((9463 + i)) node --import tsx apps/worker/src/main.ts &
  pids+=($!)
done

stop() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap stop INT TERM
echo "oncehook: ingest on :${PORT:-3000}, ${WORKERS} worker(s), sandbox APIs on :${SANDBOX_PORT:-4010}. Ctrl-C to stop." >&2
wait -n "${pids[@]}" || true
stop
