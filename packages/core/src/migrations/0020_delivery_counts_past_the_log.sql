-- 0020: an event's duplicates are counted in `delivery_counts` only once they no longer fit its
-- delivery log (issue 66). Until now every duplicate upserted its event's counter row: a row
-- inserted at the first duplicate and a new row version at each one after (1.9 of the 13 to 15
-- rows written per event in the bench, three deliveries each), although the log (`deliveries`)
-- already holds each of an event's first DELIVERY_LOG_ROWS (100) deliveries as a row. Now a
-- duplicate that fits the log adds its log row only. The counter row is written by the first
-- duplicate that does not fit (it then counts every duplicate, those in the log included, as
-- it always did) and kept up by every duplicate after it. An event's deliveries: 1 + its
-- counter's duplicates when it has a counter row, else its log's rows; the last one's time: the
-- counter's `last_at`, else the log's newest duplicate.
--
-- The bound (100 rows, under any concurrency) needs each claim to count its event's log after
-- every earlier claim of that event has committed. This function, called by the claim for each
-- event it adds `p_new` duplicates to, takes the event's log lock (an advisory lock, held until
-- the claim's commit), then reads and writes in snapshots taken after the lock was granted: a
-- statement inside a function takes a snapshot of its own, where the claim statement's, taken
-- before it waited, would miss the rows (and the counter row) of the claim it waited for (the
-- same reason as flow_gate, 0014). It keeps the counter up (or writes it when the duplicates
-- outgrow the `p_log_rows` the log keeps) and returns the event's deliveries before these: the
-- claim logs as many of them as still fit. The claims call it in event id order, so two claims
-- wait for each other and never deadlock. The lock's key is hashed from this schema and the
-- event: two installations in one database never share one. An ingest of an older version,
-- during a rolling upgrade, upserts the counter without the lock, as it did: the log may then
-- take a few rows past its bound, and the counter counts every duplicate either way.
create function :ONCEHOOK_SCHEMA.delivery_log_count(p_event bigint, p_new integer, p_log_rows integer)
returns bigint language plpgsql volatile as $$
declare
  v_counted bigint;
  v_before bigint;
begin
  perform pg_advisory_xact_lock(hashtextextended('oncehook-delivery-log::ONCEHOOK_SCHEMA', p_event));
  select c.duplicates into v_counted from :ONCEHOOK_SCHEMA.delivery_counts c where c.event_row_id = p_event;
  if v_counted is not null then
    update :ONCEHOOK_SCHEMA.delivery_counts set duplicates = duplicates + p_new, last_at = now() where event_row_id = p_event;
    return 1 + v_counted;
  end if;
  -- At least the first delivery: 1 for an event the calling statement created (its row is not
  -- in yet), or whose log retention pruned.
  select greatest(count(*), 1) into v_before from :ONCEHOOK_SCHEMA.deliveries d where d.event_row_id = p_event;
  if v_before + p_new > p_log_rows then
    insert into :ONCEHOOK_SCHEMA.delivery_counts (event_row_id, duplicates, last_at) values (p_event, v_before - 1 + p_new, now())
      on conflict (event_row_id) do update set duplicates = :ONCEHOOK_SCHEMA.delivery_counts.duplicates + p_new, last_at = now();
  end if;
  return v_before;
end $$;
