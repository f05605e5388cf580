-- 0001: the event table (the dedupe key, the state machine, the lease) and step records.
-- Append-only: never edit a migration that has shipped; add the next number instead.

-- One row per event (not per delivery). The unique key (provider, event_id) is what turns
-- at-least-once delivery into a single row: ingest claims with
--   INSERT ... ON CONFLICT (provider, event_id) DO NOTHING RETURNING id
create table webhook_events (
  id           bigint generated always as identity primary key,
  -- The source name: the URL segment (/webhooks/:provider) and the dedupe namespace. Two
  -- Stripe accounts are two sources with two namespaces.
  provider     text not null,
  -- The signature scheme / provider family (stripe, github, ...): handlers are looked up by it.
  kind         text not null,
  -- The provider's id that is stable across retries (see docs/providers.md).
  event_id     text not null,
  type         text not null,
  payload      jsonb not null,
  -- Creation time the provider signed, where the scheme has one (for stale-update checks).
  signed_at    timestamptz,
  -- Provider-specific facts about the first delivery worth keeping (Shopify's event id,
  -- GitHub's hook id and delivery GUID, Paddle's notification id, ...).
  meta         jsonb not null default '{}',
  state        text not null default 'received'
               check (state in ('received', 'processing', 'done', 'failed')),
  -- Claims so far (a crash mid-handler counts: it is how a poison event reaches `failed`).
  attempts     integer not null default 0,
  -- Replay generation: outbound idempotency keys and step records are per generation.
  generation   integer not null default 0,
  -- The lease: who may write for this event right now, and until when. Every transition and
  -- every step transaction checks lease_token (the fence).
  lease_token  uuid,
  lease_until  timestamptz,
  last_error   text,
  -- Why an event finished without a handler (unknown type) and similar operator notes.
  note         text,
  received_at  timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  finished_at  timestamptz,
  constraint webhook_events_key unique (provider, event_id),
  -- A lease exists exactly while the event is processing.
  constraint webhook_events_lease_iff_processing
    check ((state = 'processing') = (lease_token is not null and lease_until is not null))
);

-- The reconciler's two scans: received rows nobody picked up, processing rows whose lease ran out.
create index webhook_events_received_idx on webhook_events (updated_at) where state = 'received';
create index webhook_events_processing_idx on webhook_events (lease_until) where state = 'processing';

-- Recovery points. A step that committed is never run again for the same generation: a
-- resumed attempt reads its recorded result instead.
create table webhook_event_steps (
  event_row_id bigint not null references webhook_events (id) on delete cascade,
  generation   integer not null,
  name         text not null,
  result       jsonb,
  completed_at timestamptz not null default now(),
  primary key (event_row_id, generation, name)
);
