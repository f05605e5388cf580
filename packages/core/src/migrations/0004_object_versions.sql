-- 0004: ordering per domain object (the SDK's ctx.ordered). For each handler and object key,
-- the highest version the handler applied (Stripe: the event's `created`; Shopify: the
-- resource's `updated_at`; any number the handler chooses). Written inside the handler's local
-- step, so it commits or rolls back with the step's writes; an update whose version is below
-- the recorded one is stale and the handler skips it. Not tied to an event: it outlives
-- payload retention, like the objects it describes.
create table :ONCEHOOK_SCHEMA.object_versions (
  handler    text not null,
  object_key text not null,
  version    numeric not null,
  updated_at timestamptz not null default now(),
  primary key (handler, object_key)
);
