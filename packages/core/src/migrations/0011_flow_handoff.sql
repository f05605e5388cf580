-- 0011: a run waiting for a concurrency slot has no job of its own (docs/flow-control.md, "How a
-- waiting run starts later"): a run of the same (handler, key) that ends wakes the longest
-- waiter. `flow_limit` is the limit the waiter was held back by, so the reconciler can tell a
-- group whose slots are full (its waiters wait on purpose: nothing to do) from one with a free
-- slot and waiters nobody woke (a wake-up job lost with Redis, a worker killed between its run
-- and the wake-up): only those are woken again.
alter table :ONCEHOOK_SCHEMA.handler_runs add column flow_limit integer;

-- A run waiting for the rate looks again in the window its turn is expected in (the runs of its
-- handler and `rate_key` that waited longer, a limit's worth per window), not every window: a
-- backlog of N waiters costs about N looks, not N per window.
alter table :ONCEHOOK_SCHEMA.handler_runs add column rate_key text;
