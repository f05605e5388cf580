-- 0004: operating Oncehook: who replayed or re-drove what and why, and the index behind the
-- dead-letter views and gauges.

-- Every operator action on an event (re-drive: same generation, same outbound keys; replay:
-- a new generation, new keys).
create table webhook_event_replays (
  id            bigint generated always as identity primary key,
  event_row_id  bigint not null references webhook_events (id) on delete cascade,
  mode          text not null check (mode in ('redrive', 'replay')),
  from_state    text not null,
  generation    integer not null,
  actor         text not null,
  reason        text not null,
  created_at    timestamptz not null default now()
);
create index webhook_event_replays_event_idx on webhook_event_replays (event_row_id);

-- Dead letters are few and looked at often.
create index webhook_events_failed_idx on webhook_events (updated_at) where state = 'failed';
-- Listing by provider/type/age for operators.
create index webhook_events_provider_received_idx on webhook_events (provider, received_at);
