-- The example shop's tables (examples/shop), in the application's schema. Applied by
-- `npm run migrate -- --set shop --dir examples/shop/migrations` (npm start, the demo and the
-- tests do it), never by Oncehook's own migrations. IF NOT EXISTS: databases from before the
-- example had its own migrations already hold these tables, created by the framework then.

-- An account ledger credited by payments. Deliberately WITHOUT a unique constraint on the
-- source event: a ledger may legitimately hold several entries per event, and the tests must
-- prove that the step machinery (not a constraint) applies each credit exactly once.
create table if not exists ledger_accounts (
  id            text primary key,
  balance_cents bigint not null default 0,
  updated_at    timestamptz not null default now()
);

create table if not exists ledger_entries (
  id              bigint generated always as identity primary key,
  account_id      text not null references ledger_accounts (id),
  amount_cents    bigint not null,
  currency        text not null,
  source_provider text not null,
  source_event_id text not null,
  created_at      timestamptz not null default now()
);
create index if not exists ledger_entries_source_idx on ledger_entries (source_provider, source_event_id);

-- Orders that are charged, receipted and shipped.
create table if not exists example_orders (
  id            text primary key,
  customer_id   text not null,
  email         text not null,
  currency      text not null,
  total_cents   bigint not null,
  paid_cents    bigint not null default 0,
  -- pending until payments reach the total; the payment that gets it there requests shipment
  status        text not null default 'pending' check (status in ('pending', 'paid')),
  payments      integer not null default 0,
  charge_id     text,
  receipt_ids   text[] not null default '{}',
  shipment_id   text,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now()
);

-- Customer profiles that ignore stale (out-of-order) updates.
create table if not exists example_customers (
  id          text primary key,
  email       text,
  name        text,
  -- Signed creation time of the last event applied. An event older than this is stale (it
  -- arrived out of order) and is ignored.
  version_at  timestamptz not null,
  updated_at  timestamptz not null default now()
);
