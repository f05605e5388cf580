-- 0019: an attempt writes its own row only when it ends other than `done` (issue 66). Until now
-- every lease inserted a `run_attempts` row and every verdict updated it: two row versions, two
-- index entries and a foreign-key check per attempt, for the common attempt that simply ends
-- done, whose every field the run row already holds.
--
-- Now the run row describes its current attempt: `attempt_started_at` (set by every lease, in the
-- lease's own UPDATE or INSERT: no extra row version), its token, `attempts` (the number) and,
-- once done, `finished_at`. A row of `run_attempts` is written when an attempt ends any other way:
-- failed, released for a retry, stopped by `pause --now` (with their outcome, as before), and a
-- lease that expired (its worker died or hung) when the reconciler, a re-drive, a wait or another
-- lease takes the run over (ended_at and outcome NULL, as before). A done attempt gets a row only
-- when its run leaves `done` (a replay), so the history of earlier generations stays whole.
--
-- `attempt_history` reads the whole log: the rows, and each run's current attempt from the run row
-- (open while it is `processing`, `done` once done). The console and `oncehook` read it; read it
-- instead of `run_attempts` in your own queries.
--
-- An attempt leased before this migration has its row already (attempt_started_at is NULL on its
-- run): its verdict, done or not, closes that row as before.
alter table :ONCEHOOK_SCHEMA.handler_runs add column attempt_started_at timestamptz;

create view :ONCEHOOK_SCHEMA.attempt_history as
  select run_id, lease_token, generation, attempt, started_at, ended_at, outcome, error
    from :ONCEHOOK_SCHEMA.run_attempts
  union all
  select id, lease_token, generation, attempts, attempt_started_at,
         case when state = 'done' then finished_at end, case when state = 'done' then 'done' end, null::text
    from :ONCEHOOK_SCHEMA.handler_runs
   where attempt_started_at is not null and state in ('processing', 'done');
