-- 0003: the example domain grows (apps/worker/src/example): orders that are charged, receipted
-- and shipped, and customer profiles that ignore stale (out-of-order) updates.

create table example_orders (
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

create table example_customers (
  id          text primary key,
  email       text,
  name        text,
  -- Signed creation time of the last event applied. An event older than this is stale (it
  -- arrived out of order) and is ignored.
  version_at  timestamptz not null,
  updated_at  timestamptz not null default now()
);
