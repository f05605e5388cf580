-- 0002: a second dedupe key for sources whose event id is not signed, the handlers the
-- workers run, and the domain object an external step's key is derived from.

-- sha256 of the raw body (GitHub, Shopify, generic HMAC sources with a header id; null for
-- sources that sign their ids). Unique per source, like (provider, event_id): the claim's
-- `ON CONFLICT DO NOTHING` (without a target) stops at either, so a captured body replayed
-- under a new id is a duplicate. Partial: sources that sign their ids pay nothing for it.
alter table :ONCEHOOK_SCHEMA.events add column body_hash bytea;
create unique index events_body_hash_key on :ONCEHOOK_SCHEMA.events (provider, body_hash) where body_hash is not null;

-- The handlers workers have loaded (upserted by each worker at start). Ingest reads it to keep
-- the `type` label of its metrics to types something handles (anything else counts as `other`,
-- so a flood of made-up types cannot create series); operators see what runs where.
create table :ONCEHOOK_SCHEMA.handlers (
  name         text primary key,
  source       text not null,
  kind         text,
  type         text not null,
  description  text,
  first_seen_at timestamptz not null default now(),
  last_seen_at  timestamptz not null default now()
);

-- An external step keyed on a domain object (`ctx.step('charge', fn, { key: order.id })`): the
-- object, so a replay's plan derives the same new key the handler will send.
alter table :ONCEHOOK_SCHEMA.steps add column key_subject text;
