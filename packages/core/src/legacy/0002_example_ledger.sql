-- 0002: the example domain (apps/worker/src/example): an account ledger credited by
-- Stripe payment_intent.succeeded. Deliberately WITHOUT a unique constraint on the source
-- event: a ledger may legitimately hold several entries per event, and the tests must prove
-- that the step machinery (not a constraint) applies each credit exactly once.
create table ledger_accounts (
  id            text primary key,
  balance_cents bigint not null default 0,
  updated_at    timestamptz not null default now()
);

create table ledger_entries (
  id              bigint generated always as identity primary key,
  account_id      text not null references ledger_accounts (id),
  amount_cents    bigint not null,
  currency        text not null,
  source_provider text not null,
  source_event_id text not null,
  created_at      timestamptz not null default now()
);
create index ledger_entries_source_idx on ledger_entries (source_provider, source_event_id);
