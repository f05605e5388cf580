-- 0017: a local step's record and its COMMIT travel in one round trip (steps/local-step.ts,
-- shared's commitWith). A record statement that finds the lease no longer ours must then FAIL,
-- not return 0 rows: on an error Postgres skips every message up to the Sync, the COMMIT sent
-- behind the record among them, and the step's transaction rolls back. 0 rows would let that
-- COMMIT land the step's writes without its run's `done`. (Under the fence the guard cannot
-- fail; this is what makes "cannot" a rollback if it ever did.)
--
-- Raises SQLSTATE OH001, which the worker turns into LeaseLostError (store/runs.ts, LEASE_LOST).
create function :ONCEHOOK_SCHEMA.lease_lost(p_run bigint)
returns integer language plpgsql volatile as $$
begin
  raise exception 'oncehook: the lease of run % is no longer this worker''s: its step rolls back', p_run
    using errcode = 'OH001';
end $$;
