-- 0009: the delivery log keeps the first DELIVERY_LOG_ROWS (100) deliveries of an event in full
-- and counts the rest. One event redelivered 51,162 times had as many rows (6.3 MB), kept for
-- its 35 days. Now each event has at most 100 rows in `deliveries`, and this narrow row counts
-- every duplicate (the first 99 and all that follow) and when the last one came. Written by
-- the claim's own statement (an upsert, rows in event order); no worker ever touches it, so a
-- duplicate never waits on a handler's transaction. It goes with its event (cascade) and with
-- its payload (retention prunes it like the log).
create table :ONCEHOOK_SCHEMA.delivery_counts (
  event_row_id bigint primary key references :ONCEHOOK_SCHEMA.events (id) on delete cascade,
  duplicates   bigint not null,
  last_at      timestamptz not null
);
insert into :ONCEHOOK_SCHEMA.delivery_counts (event_row_id, duplicates, last_at)
select event_row_id, count(*) filter (where duplicate), max(received_at)
  from :ONCEHOOK_SCHEMA.deliveries
 group by event_row_id
having count(*) filter (where duplicate) > 0;
