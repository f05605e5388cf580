-- 0013: activity by minute, for the console's pictures (docs/operating.md, "Activity"): what
-- each process counted anyway (its Prometheus counters: deliveries by source and result, run
-- attempts by handler and outcome with their latency buckets), written as the minute's deltas
-- every ACTIVITY_FLUSH_MS by each process in one statement, and the backlog the reconciler's
-- leader samples each pass. Kept 48 hours (the leader deletes older minutes). Grafana stays for
-- those who have Prometheus; this needs nothing but Postgres.
create table :ONCEHOOK_SCHEMA.activity (
  minute timestamptz not null,
  -- delivery (name: source; result: new, duplicate, rejected, error, expired), run (name:
  -- handler; result: done, retry, failed, lease-lost), backlog (name: '' or a handler; result:
  -- received, processing, oldest_received_s, waiting:<reason>)
  kind text not null,
  name text not null,
  result text not null,
  -- a delta (delivery, run) or the last sample of the minute (backlog)
  count bigint not null,
  -- run: the attempts per latency bucket (ACTIVITY_LATENCY_BOUNDS_S, then over the last)
  buckets bigint[],
  primary key (minute, kind, name, result)
);

-- What each handler declares (its limits, retries, priority), for the admin's handler pages:
-- written by every worker at its start with the rest of the registry.
alter table :ONCEHOOK_SCHEMA.handlers add column settings jsonb;

-- Which workers have a handler loaded: each worker writes its handlers at start and touches
-- its rows at every reconciler pass (seen_at), and deletes them when it stops; the handler pages
-- list the workers seen within the last few passes. The leader deletes rows unseen for a day (a
-- worker killed -9 never deletes its own).
create table :ONCEHOOK_SCHEMA.handler_workers (
  handler text not null,
  worker text not null,
  started_at timestamptz not null default now(),
  seen_at timestamptz not null default now(),
  primary key (worker, handler)
);
