#!/usr/bin/env bash
# For CI (.ci/run) and a fresh Debian machine: makes sure the suite's shared Postgres and Redis
# answer, creating and starting them when they do not, and checks the tools the fault tests
# need. Never stops or restarts a running one (fault tests start servers of their own on other
# ports). `npm start` does not use it (scripts/start.ts says what to start instead).
#
# What the suite needs (README, "Tests"): Postgres on 127.0.0.1:5432 that lets user `postgres`
# in without a password (trust, as the test clusters are), Redis on 127.0.0.1:6379, and the
# Debian tools pg_createcluster/pg_ctlcluster/pg_dropcluster and redis-server. With
# --install, missing Debian packages (postgresql, redis-server) are installed first: the
# postgresql package then creates a cluster `main` that asks for passwords on TCP, and this
# script recreates it with trust auth (it holds nothing yet: it was created moments ago).
set -euo pipefail

install=false
[ "${1:-}" = "--install" ] && install=true

apt_install() {
  echo "== apt-get install $*"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

fresh_postgres=false
if ! command -v pg_ctlcluster >/dev/null || ! command -v pg_isready >/dev/null; then
  if $install; then
    apt_install postgresql
    fresh_postgres=true
  fi
fi
if ! command -v redis-server >/dev/null && $install; then apt_install redis-server; fi

for tool in pg_createcluster pg_ctlcluster pg_dropcluster pg_lsclusters pg_isready redis-server redis-cli; do
  command -v "$tool" >/dev/null || {
    echo "missing $tool, which the tests need (Debian: apt-get install postgresql redis-server; or run: bash scripts/ensure-services.sh --install)" >&2
    exit 1
  }
done

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if $fresh_postgres && pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
  echo "== recreating the new PostgreSQL $version cluster 'main' with trust auth for local connections (test machine)"
  pg_dropcluster --stop "$version" main
fi

if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
    echo "== creating PostgreSQL $version cluster 'main' on port 5432 (trust auth: a test machine)"
    pg_createcluster "$version" main --port 5432 -- --auth-local=trust --auth-host=trust >/dev/null
  fi
  echo "== starting PostgreSQL $version main"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432
# The tests connect as `postgres` over TCP without a password (TEST_PG_URL overrides it).
if ! PGCONNECT_TIMEOUT=5 psql "${TEST_PG_URL:-postgres://postgres@127.0.0.1:5432}/postgres" -w -qAtc 'SELECT 1' >/dev/null 2>&1; then
  echo "Postgres on 127.0.0.1:5432 does not let user postgres in without a password; the tests need trust auth for local TCP connections (pg_hba.conf: host all all 127.0.0.1/32 trust), or set TEST_PG_URL" >&2
  exit 1
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "== starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
echo "redis: $(redis-cli -h 127.0.0.1 -p 6379 ping)"
