-- 0014: a concurrency-limited run takes its slot in ONE statement, with no client round trip
-- while the slot's lock is held (store/flow.ts gateAcquire; docs/flow-control.md, "The gate").
-- Before, the gate's transaction held the (handler, key) advisory lock across three round trips
-- (the count, the lease, COMMIT): on a loaded host that admitted a few tens of runs per second,
-- whatever the limit (docs/benchmarks.md, "What one more handler, one destination and one flow
-- limit cost").
--
-- PL/pgSQL and VOLATILE on purpose: every query a volatile function runs takes a NEW snapshot
-- (in READ COMMITTED), so a count run after the lock was granted sees every lease the previous
-- holder committed. A count in the calling statement's own snapshot, taken before that
-- statement waited for the lock, would miss it, and two runs could take the last slot.

-- The slots of (handler, key) in use: its runs in progress under a live lease. A crashed
-- worker's run stops counting when its lease expires. The one definition of a slot in use.
create function :ONCEHOOK_SCHEMA.flow_slots_in_use(p_handler text, p_flow_key text)
returns integer language plpgsql volatile as $$
declare
  n integer;
begin
  select count(*)::int into n from :ONCEHOOK_SCHEMA.handler_runs
   where handler = p_handler and state = 'processing' and lease_until > clock_timestamp()
     and (p_flow_key is null or flow_key = p_flow_key);
  return n;
end $$;

-- The gate: takes the (handler, key) advisory lock (transaction-scoped: held until the caller's
-- transaction commits its lease), then counts the slots in use. `wait`: queue for the lock
-- (the one-statement lease, which holds it for that statement only); otherwise only try it and
-- return NULL when another gate holds it (a gate whose transaction holds it across round trips,
-- rate-limited handlers: queueing there would pile up waiting transactions).
create function :ONCEHOOK_SCHEMA.flow_gate(lock_key bigint, p_handler text, p_flow_key text, wait boolean)
returns integer language plpgsql volatile as $$
begin
  if wait then
    perform pg_advisory_xact_lock(lock_key);
  elsif not pg_try_advisory_xact_lock(lock_key) then
    return null;
  end if;
  return :ONCEHOOK_SCHEMA.flow_slots_in_use(p_handler, p_flow_key);
end $$;
