-- 0001: Oncehook's tables, in a schema of their own (:ONCEHOOK_SCHEMA, `oncehook` by default;
-- the migration runner substitutes the name). Append-only: never edit a migration that has
-- shipped; add the next number instead. (Databases created before the schema existed, with
-- the tables in `public`, are upgraded by db/legacy-upgrade.sql.)

create schema if not exists :ONCEHOOK_SCHEMA;

-- One row per event (not per delivery). The unique key (provider, event_id) is what turns
-- at-least-once delivery into a single row: ingest claims with
--   INSERT ... ON CONFLICT (provider, event_id) DO NOTHING RETURNING id
create table :ONCEHOOK_SCHEMA.events (
  id           bigint generated always as identity primary key,
  -- The source name: the URL segment (/webhooks/:provider) and the dedupe namespace. Two
  -- Stripe accounts are two sources with two namespaces.
  provider     text not null,
  -- The signature scheme / provider family (stripe, github, ...): handlers match on it.
  kind         text not null,
  -- The provider's id that is stable across retries (see docs/providers.md).
  event_id     text not null,
  type         text not null,
  payload      jsonb not null,
  -- Creation time the provider signed, where the scheme has one.
  signed_at    timestamptz,
  -- Provider-specific facts about the first delivery (Shopify's shop domain, GitHub's hook id, ...).
  meta         jsonb not null default '{}',
  -- received:   claimed; its handler runs are not created yet (a worker dispatches it)
  -- processing: its handler runs exist and not all of them have finished
  -- done:       every run done (or no handler and the policy says done)
  -- failed:     every run finished and at least one failed (a dead letter to look at)
  state        text not null default 'received'
               check (state in ('received', 'processing', 'done', 'failed')),
  -- Handler runs not finished yet, and runs in `failed`. Every run transition updates them in
  -- the same statement (UPDATE ... SET runs_pending = runs_pending - 1, state = CASE ...): when
  -- two runs of one event finish at once, the second UPDATE waits for the first's row lock and
  -- then re-evaluates on the newest row, so the event's state never misses a run.
  runs_pending integer not null default 0 check (runs_pending >= 0),
  runs_failed  integer not null default 0 check (runs_failed >= 0),
  -- Why the event finished without handlers, and similar notes.
  note         text,
  received_at  timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  finished_at  timestamptz,
  constraint events_key unique (provider, event_id)
);
-- The reconciler's scan for events nobody dispatched (Redis lost the job).
create index events_received_idx on :ONCEHOOK_SCHEMA.events (updated_at) where state = 'received';
-- Listing by provider and age for operators.
create index events_provider_received_idx on :ONCEHOOK_SCHEMA.events (provider, received_at);
-- Retention: one provider's oldest done events, by index range scan (cost independent of table size).
create index events_done_retention_idx on :ONCEHOOK_SCHEMA.events (provider, received_at) where state = 'done';

-- One row per (event, handler): each handler runs each event exactly once, with its own
-- state, lease, attempts, generation and steps. The worker that dispatches an event creates
-- the runs of every handler registered for its (source, type).
create table :ONCEHOOK_SCHEMA.handler_runs (
  id           bigint generated always as identity primary key,
  event_row_id bigint not null references :ONCEHOOK_SCHEMA.events (id) on delete cascade,
  -- The handler's stable name (defineHandler({ name })). Empty only for runs carried over from
  -- a database older than handler names (bound to the event type's handler when next run).
  handler      text not null,
  state        text not null default 'received'
               check (state in ('received', 'processing', 'done', 'failed')),
  -- Claims so far (a crash mid-handler counts: it is how a poison event reaches `failed`).
  attempts     integer not null default 0,
  -- Replay generation: outbound idempotency keys and step records are per generation.
  generation   integer not null default 0,
  -- How outbound keys are derived: 2 = (source, event id, handler, step, generation);
  -- 1 = without the handler (runs carried over from before handler names, so their keys do
  -- not change while they are in flight).
  key_scheme   smallint not null default 2 check (key_scheme in (1, 2)),
  -- The lease: who may write for this run right now, and until when. Every transition and
  -- every step transaction checks lease_token (the fence).
  lease_token  uuid,
  lease_until  timestamptz,
  last_error   text,
  note         text,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  finished_at  timestamptz,
  constraint handler_runs_key unique (event_row_id, handler),
  -- A lease exists exactly while the run is processing.
  constraint handler_runs_lease_iff_processing
    check ((state = 'processing') = (lease_token is not null and lease_until is not null))
);
-- The reconciler's two scans: received runs nobody picked up, processing runs whose lease ran out.
create index handler_runs_received_idx on :ONCEHOOK_SCHEMA.handler_runs (updated_at) where state = 'received';
create index handler_runs_processing_idx on :ONCEHOOK_SCHEMA.handler_runs (lease_until) where state = 'processing';
-- Dead letters are few and looked at often.
create index handler_runs_failed_idx on :ONCEHOOK_SCHEMA.handler_runs (updated_at) where state = 'failed';

-- Recovery points. A step that committed is never run again for the same generation: a
-- resumed attempt reads its recorded result instead.
create table :ONCEHOOK_SCHEMA.steps (
  run_id          bigint not null references :ONCEHOOK_SCHEMA.handler_runs (id) on delete cascade,
  generation      integer not null,
  name            text not null,
  -- local: ctx.transaction (domain writes in the fenced transaction); external: ctx.step.
  -- Null for steps carried over from a database older than step kinds.
  kind            text check (kind in ('local', 'external')),
  result          jsonb,
  -- The idempotency key an external step was given (what the downstream API saw).
  idempotency_key text,
  -- Copied from an earlier generation by a replay that did not re-run this step.
  reused_from     integer,
  completed_at    timestamptz not null default now(),
  primary key (run_id, generation, name)
);

-- Every operator action (re-drive: same generation, same keys; replay: a new generation,
-- new keys for the steps it re-runs), who did it and why.
create table :ONCEHOOK_SCHEMA.operator_actions (
  id            bigint generated always as identity primary key,
  event_row_id  bigint not null references :ONCEHOOK_SCHEMA.events (id) on delete cascade,
  run_id        bigint references :ONCEHOOK_SCHEMA.handler_runs (id) on delete cascade,
  mode          text not null check (mode in ('redrive', 'replay')),
  from_state    text not null,
  generation    integer not null,
  actor         text not null,
  reason        text not null,
  -- Replay: which steps were re-run and which reused.
  detail        jsonb,
  created_at    timestamptz not null default now()
);
create index operator_actions_event_idx on :ONCEHOOK_SCHEMA.operator_actions (event_row_id);
