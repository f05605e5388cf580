-- 0012: failure groups (docs/operating.md, "Failure groups"). A failed or retrying run belongs to
-- the group of its handler and the SHAPE of its last error: the message with uuids, prefixed ids
-- (cus_..., evt_...), hex ids and numbers other than a 3-digit status (100-599) replaced, spaces
-- folded, cut at 200 characters. One SQL function, so the grouping, the group filter and an
-- index on it can never disagree.
create function :ONCEHOOK_SCHEMA.error_shape(message text) returns text
  language sql immutable parallel safe
  as $$ select left(btrim(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(coalesce(message, ''),
    '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
    '\m[A-Za-z]{1,10}_[A-Za-z0-9]*[0-9][A-Za-z0-9]*\M', '<id>', 'g'),
    '\m[0-9a-fA-F]*[0-9][0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\M|\m[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*[0-9][0-9a-fA-F]*\M', '<hex>', 'g'),
    '(?![1-5][0-9][0-9]\M)\m[0-9]+(\.[0-9]+)?', '#', 'g'),
    '\s+', ' ', 'g')), 200) $$;

-- An operator marked a group resolved (the fix is out): the group is hidden until one of its runs
-- fails again after `resolved_at` (it is then open again, "regressed"). Nothing about the runs
-- changes.
create table :ONCEHOOK_SCHEMA.failure_resolutions (
  handler text not null,
  shape text not null,
  resolved_at timestamptz not null default now(),
  actor text not null,
  reason text not null,
  primary key (handler, shape)
);
