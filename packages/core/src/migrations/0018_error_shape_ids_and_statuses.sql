-- 0018: a failure group holds one cause (issue 64). 0012's shape kept every number from 100 to
-- 599 as if it were a status code, so "answered 400 in 434 ms" split by response time (and an
-- order number like 404 split too), and folded an id only when it held a digit (about 8% of
-- Stripe-shaped ids have none: `cus_AbCdEfGhIjKlMn`). Now:
--
-- - a 3-digit number from 100 to 599 is kept only as a status code: right after "answered",
--   "status", "code" or "HTTP" (with "/1.1", and " ", ":" or "=" between); every other number
--   is `#`;
-- - an id with a prefix providers use (Stripe's, Paddle's, ...) and at least 8 letters and digits
--   after its underscore is `<id>` whether or not it holds a digit, if it holds a digit or a
--   capital (so `in_progress`, `card_declined`, `insufficient_funds` stay words); any other
--   `word_` followed by letters and digits with a digit in them is `<id>`, as before.
--
-- The failing runs are shaped again, and the groups with them: groups whose shapes now agree are
-- one, keeping the earliest opening and a notification already sent (so the upgrade notifies
-- nothing), resolved only if every one of them was.
create or replace function :ONCEHOOK_SCHEMA.error_shape(message text) returns text
  language sql immutable parallel safe
  as $$ select left(btrim(regexp_replace(replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(coalesce(message, ''),
    '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
    '\m(acct|adj|ba|btok|card|cbtxn|ch|cn|cs|ctm|cus|dp|du|evt|fee|file|ic|ii|il|in|ipi|ntf|po|pi|pm|pri|price|pro|prod|py|re|seti|si|src|sub|tok|tr|txn|txr|whsec)_(?=[A-Za-z0-9]*[0-9A-Z])[A-Za-z0-9]{8,}\M', '<id>', 'g'),
    '\m[A-Za-z]{1,10}_[A-Za-z0-9]*[0-9][A-Za-z0-9]*\M', '<id>', 'g'),
    '\m[0-9a-fA-F]*[0-9][0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\M|\m[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*[0-9][0-9a-fA-F]*\M', '<hex>', 'g'),
    -- A status code, marked (chr(2)) so the next rule leaves it.
    '((answered|status|code|http(/[0-9.]+)?)[ :=]{0,3})([1-5][0-9][0-9])\M', '\1' || chr(2) || '\4', 'gi'),
    '(?<!' || chr(2) || ')\m[0-9]+(\.[0-9]+)?', '#', 'g'),
    chr(2), ''),
    '\s+', ' ', 'g')), 200) $$;

update :ONCEHOOK_SCHEMA.handler_runs set error_shape = :ONCEHOOK_SCHEMA.error_shape(last_error)
 where error_shape is not null;

-- A group's shape is a shape of the old function: shaping it again gives what its runs' messages
-- give now (the old tokens, `#` and `<id>`, are left as they are).
create temporary table reshaped_groups on commit drop as
  select handler, :ONCEHOOK_SCHEMA.error_shape(shape) as shape,
         min(opened_at) as opened_at,
         case when bool_and(closed_at is not null) then max(closed_at) end as closed_at,
         min(notified_at) as notified_at,
         max(notify_attempts) as notify_attempts,
         case when bool_and(resolved_at is not null) then max(resolved_at) end as resolved_at,
         (array_agg(actor order by resolved_at desc nulls last))[1] as actor,
         (array_agg(reason order by resolved_at desc nulls last))[1] as reason
    from :ONCEHOOK_SCHEMA.failure_groups
   group by handler, :ONCEHOOK_SCHEMA.error_shape(shape);
delete from :ONCEHOOK_SCHEMA.failure_groups;
insert into :ONCEHOOK_SCHEMA.failure_groups (handler, shape, opened_at, closed_at, notified_at, notify_attempts, resolved_at, actor, reason)
  select handler, shape, opened_at, closed_at, notified_at, notify_attempts, resolved_at,
         case when resolved_at is not null then actor end, case when resolved_at is not null then reason end
    from reshaped_groups;
