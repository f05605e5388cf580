-- 0021: a lease statement returns the run's recorded steps itself (issue 66), where a second
-- statement read them after every lease that is not a dispatch's (a retry, a limited handler's
-- run, a takeover, a repeated dispatch): one round trip per such lease.
--
-- Why a function: a lease that takes a run over may wait on the old owner's step transaction
-- (its fence holds the run row). When that transaction commits, the lease's UPDATE re-checks
-- its WHERE on the newest row version and takes the lease, but a subquery in its RETURNING
-- reads with the statement's snapshot, taken before that commit: it would miss the step just
-- committed, and the new owner would run it again (docs/architecture.md). A VOLATILE function
-- called in the RETURNING runs its query in a snapshot of its own, taken then: after the row
-- lock was granted, so it sees every step committed before the lease; and none can be committed
-- after it, since the old owner's fence now fails on the token (the lease holds the row until
-- its commit). The same reason as flow_gate (0014) and delivery_log_count (0020).
create function :ONCEHOOK_SCHEMA.leased_steps(p_run bigint, p_generation integer)
returns json language plpgsql volatile as $$
declare
  v_steps json;
begin
  select coalesce(json_agg(json_build_object('name', s.name, 'kind', s.kind, 'result', s.result,
                                             'idempotencyKey', s.idempotency_key, 'keySubject', s.key_subject)), '[]'::json)
    into v_steps
    from :ONCEHOOK_SCHEMA.steps s
   where s.run_id = p_run and s.generation = p_generation;
  return v_steps;
end $$;
