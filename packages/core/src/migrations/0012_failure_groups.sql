-- 0012: failure groups (docs/operating.md, "Failure groups"). A failed or retrying run belongs to
-- the group of its handler and the SHAPE of its last error: the message with uuids, prefixed ids
-- (cus_..., evt_...), hex ids and numbers other than a 3-digit status (100-599) replaced, spaces
-- folded, cut at 200 characters. One SQL function, so the grouping, the group filter and an
-- index on it can never disagree.
create function :ONCEHOOK_SCHEMA.error_shape(message text) returns text
  language sql immutable parallel safe
  as $$ select left(btrim(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(coalesce(message, ''),
    '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
    '\m[A-Za-z]{1,10}_[A-Za-z0-9]*[0-9][A-Za-z0-9]*\M', '<id>', 'g'),
    '\m[0-9a-fA-F]*[0-9][0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\M|\m[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*[0-9][0-9a-fA-F]*\M', '<hex>', 'g'),
    '(?![1-5][0-9][0-9]\M)\m[0-9]+(\.[0-9]+)?', '#', 'g'),
    '\s+', ' ', 'g')), 200) $$;

-- What is known of each group beyond its runs: when it opened (the reconciler's leader saw it
-- appear, or fail again after it closed or was resolved: a new opening is counted in
-- oncehook_failure_groups_opened_total and notified once, FAILURE_NOTIFY_URL), when it closed
-- (no failing run left), when its opening was notified, and an operator's resolution (hidden
-- until a run of it fails again after `resolved_at`; nothing about the runs changes).
create table :ONCEHOOK_SCHEMA.failure_groups (
  handler text not null,
  shape text not null,
  opened_at timestamptz not null default now(),
  closed_at timestamptz,
  notified_at timestamptz,
  notify_attempts integer not null default 0,
  resolved_at timestamptz,
  actor text,
  reason text,
  primary key (handler, shape)
);

-- A failing run's shape is written with its error (MARK_RUN_FAILED, RELEASE_RUN_FOR_RETRY,
-- EXPIRED_LEASES) and cleared with it (a replay), so grouping reads it instead of running the
-- regular expressions over every failed run (1.7 s over 50,000 at 10 million events; npm run
-- bench:search). A column without a default: adding it rewrites nothing. The runs failing when
-- this migration runs get theirs now (a scan of handler_runs: seconds per million runs).
alter table :ONCEHOOK_SCHEMA.handler_runs add column error_shape text;
update :ONCEHOOK_SCHEMA.handler_runs set error_shape = :ONCEHOOK_SCHEMA.error_shape(last_error)
 where last_error is not null and state in ('failed', 'received');

-- The failing runs only (a partial index: a run that is received without an error, leased or
-- done is never in it), in group order, with what the Failures page counts: the groups are an
-- index-only scan.
create index handler_runs_failing_idx on :ONCEHOOK_SCHEMA.handler_runs (handler, error_shape)
  include (state, attempts, updated_at, event_row_id)
  where error_shape is not null and state in ('failed', 'received');
