/**
 * The admin JSON API (under /admin/api, behind adminAuth). Every input is validated with zod:
 * a bad id, filter or body is a 400 naming the field, never a 500.
 *
 *   GET  /admin/api/events                 search (event-search.ts: ?state=&waiting=&source=&type=&handler=&event_id=
 *                                          &since=&until=&older_than=&payload=&group=&before=&limit=), {events, next}
 *   GET  /admin/api/events/:ref            one event (row id or source/event_id)
 *   POST /admin/api/events/:id/redrive     {"reason", "handler"?}   same generation, same keys
 *   POST /admin/api/events/:id/replay      {"reason", "handler"?, "steps"?: [...], "all_steps"?: true, "dry_run"?: true}
 *   POST /admin/api/redrive                {the search's fields, "dry_run", "reason"}: every matching event (default: failed)
 *   GET  /admin/api/failure-groups         failed and retrying runs grouped by handler and error shape (?handler=&resolved=true)
 *   POST /admin/api/failure-groups/:id/resolve  {"reason"}   hidden until a run of it fails again
 *   GET  /admin/api/pauses                 what is paused (handlers, sources), by whom, why, runs waiting
 *   POST /admin/api/pauses                 {"scope": "handler"|"source", "name", "reason", "now"?}   pause
 *   POST /admin/api/pauses/resume          {"scope", "name", "reason"}                       resume
 */
import { destinationStates, type Operations } from '@oncehook/core';
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { parseEventSearch } from '../../event-search.js';
import type { AdminEnv, AdminSettings } from './auth.js';
import { type AdminBudget, inSearchSlot, type SearchSlots } from './budget.js';

/** Text without NUL (Postgres text cannot hold it), of bounded length. */
const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((value) => !value.includes('\0'), 'must not contain a NUL character');
const rowId = z
  .string()
  .regex(/^\d{1,16}$/, 'the event is addressed by its numeric row id')
  .transform(Number)
  .refine((id) => id >= 1 && id <= Number.MAX_SAFE_INTEGER, 'a row id is from 1 to 9007199254740991');
const MAX_LIMIT = 10_000;

const redriveBody = z.object({ reason: text(1_000), handler: text(63).optional() }).strict();
const replayBody = z
  .object({
    reason: text(1_000).optional(),
    handler: text(63).optional(),
    steps: z.array(text(200)).max(100).optional(),
    all_steps: z.boolean().optional(),
    dry_run: z.boolean().optional(),
  })
  .strict()
  .refine((b) => b.dry_run === true || b.reason !== undefined, { message: 'a replay needs "reason" (recorded with the event); a dry run does not', path: ['reason'] });
const bulkBody = z.object({ dry_run: z.boolean().optional(), reason: text(1_000).optional() }).passthrough();
const groupId = z.string().regex(/^[0-9a-f]{12}$/, 'a failure group id is 12 hex digits');
const groupsQuery = z
  .object({
    handler: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'a handler name')
      .optional(),
    resolved: z.enum(['true', 'false']).optional(),
  })
  .strict();
const pauseBody = z
  .object({
    scope: z.enum(['handler', 'source']),
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'a handler or source name: 1-63 characters of a-z 0-9 . _ -'),
    reason: text(1_000),
    /** pause only: runs in progress stop at their next step boundary too. */
    now: z.boolean().optional(),
  })
  .strict();

function problem(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; ');
}

async function jsonBody(c: Context): Promise<{ ok: true; value: unknown } | { ok: false; message: string }> {
  try {
    const value: unknown = await c.req.json();
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, message: 'the body must be a JSON object' };
    return { ok: true, value };
  } catch {
    return { ok: false, message: 'the body must be a JSON object (Content-Type: application/json)' };
  }
}

export function mountAdminApi(admin: Hono<AdminEnv>, deps: { ops: Operations; slots: SearchSlots; budget: AdminBudget }, settings: AdminSettings): void {
  const { ops, slots, budget } = deps;
  const bad = (c: Context, code: string, message: string) => c.json({ error: code, message }, 400);
  const readOnly = (c: Context) => c.json({ error: 'read_only', message: 'admin is read-only (ADMIN_READ_ONLY=true)' }, 403);

  admin.get('/api/events', async (c) => {
    const search = parseEventSearch(c.req.query(), { maxLimit: 1_000 });
    if (!search.ok) return bad(c, 'bad_filter', search.message);
    // A search that is too slow is a 422 (answerAdminFailures); a client gone cancels it in Postgres.
    return inSearchSlot(c, c.get('actor'), slots, budget, async () => {
      const events = await ops.list(search.filter, { signal: c.req.raw.signal });
      const limit = search.filter.limit ?? 50;
      return c.json({ events, next: events.length === limit ? events[events.length - 1]!.id : null });
    });
  });

  admin.get('/api/failure-groups', async (c) => {
    const parsed = groupsQuery.safeParse(c.req.query());
    if (!parsed.success) return bad(c, 'bad_filter', problem(parsed.error));
    return c.json({ groups: await ops.failureGroups({ handler: parsed.data.handler, includeResolved: parsed.data.resolved === 'true' }) });
  });

  admin.post('/api/failure-groups/:id/resolve', async (c) => {
    if (settings.readOnly) return readOnly(c);
    const id = groupId.safeParse(c.req.param('id'));
    if (!id.success) return bad(c, 'bad_id', problem(id.error));
    const body = await jsonBody(c);
    if (!body.ok) return bad(c, 'bad_body', body.message);
    const parsed = z
      .object({ reason: text(1_000) })
      .strict()
      .safeParse(body.value);
    if (!parsed.success) return bad(c, 'reason_required', `resolve needs {"reason": "..."}: ${problem(parsed.error)}`);
    const result = await ops.resolveFailureGroup(id.data, c.get('actor'), parsed.data.reason);
    return c.json(result, result.ok ? 200 : 409);
  });

  admin.get('/api/events/:ref{.+}', async (c) => {
    const ref = c.req.param('ref');
    if (ref.length > 400 || ref.includes('\0')) return bad(c, 'bad_ref', 'the event is a row id or source/event_id');
    const detail = await ops.show(ref);
    return detail ? c.json(detail) : c.json({ error: 'not_found', message: `no event ${ref}` }, 404);
  });

  admin.post('/api/events/:id/redrive', async (c) => {
    if (settings.readOnly) return readOnly(c);
    const id = rowId.safeParse(c.req.param('id'));
    if (!id.success) return bad(c, 'bad_id', problem(id.error));
    const body = await jsonBody(c);
    if (!body.ok) return bad(c, 'bad_body', body.message);
    const parsed = redriveBody.safeParse(body.value);
    if (!parsed.success)
      return bad(c, parsed.error.issues.some((i) => i.path[0] === 'reason') ? 'reason_required' : 'bad_body', `redrive needs {"reason": "..."}: ${problem(parsed.error)}`);
    const result = await ops.redrive(id.data, { handler: parsed.data.handler }, c.get('actor'), parsed.data.reason);
    return c.json(result, result.ok ? 200 : 409);
  });

  admin.post('/api/events/:id/replay', async (c) => {
    const id = rowId.safeParse(c.req.param('id'));
    if (!id.success) return bad(c, 'bad_id', problem(id.error));
    const body = await jsonBody(c);
    if (!body.ok) return bad(c, 'bad_body', body.message);
    const parsed = replayBody.safeParse(body.value);
    if (!parsed.success) return bad(c, parsed.error.issues.some((i) => i.path[0] === 'reason') ? 'reason_required' : 'bad_body', problem(parsed.error));
    const b = parsed.data;
    if (!b.dry_run && settings.readOnly) return readOnly(c);
    const result = await ops.replay(id.data, { handler: b.handler, steps: b.steps, allSteps: b.all_steps, dryRun: b.dry_run }, c.get('actor'), b.reason ?? 'dry run');
    return c.json(result, result.ok ? 200 : 409);
  });

  admin.get('/api/pauses', async (c) => c.json({ pauses: await ops.pauses() }));
  admin.get('/api/destinations', async (c) => {
    const configured = settings.destinations ?? [];
    if (typeof configured === 'string') return c.json({ error: 'invalid_configuration', message: configured }, 500);
    return c.json({ destinations: await destinationStates(ops, configured) });
  });

  for (const [path, action] of [
    ['/api/pauses', 'pause'],
    ['/api/pauses/resume', 'resume'],
  ] as const) {
    admin.post(path, async (c) => {
      if (settings.readOnly) return readOnly(c);
      const body = await jsonBody(c);
      if (!body.ok) return bad(c, 'bad_body', body.message);
      const parsed = pauseBody.safeParse(body.value);
      if (!parsed.success)
        return bad(
          c,
          parsed.error.issues.some((i) => i.path[0] === 'reason') ? 'reason_required' : 'bad_body',
          `${action} needs {"scope": "handler"|"source", "name", "reason"}: ${problem(parsed.error)}`,
        );
      const { scope, name, reason, now } = parsed.data;
      if (action === 'resume' && now !== undefined) return bad(c, 'bad_body', '"now" applies to a pause, not a resume');
      const result = action === 'pause' ? await ops.pause({ scope, name }, c.get('actor'), reason, { now }) : await ops.resume({ scope, name }, c.get('actor'), reason);
      return c.json(result, result.ok ? 200 : 409);
    });
  }

  admin.post('/api/redrive', async (c) => {
    const body = await jsonBody(c);
    if (!body.ok) return bad(c, 'bad_body', body.message);
    const parsed = bulkBody.safeParse(body.value);
    if (!parsed.success) return bad(c, 'bad_body', problem(parsed.error));
    const { dry_run, reason, ...fields } = parsed.data;
    // The search's fields, as the URL gives them (numbers written as numbers are accepted).
    const raw: Record<string, string> = {};
    for (const [key, value] of Object.entries(fields)) {
      if (typeof value !== 'string' && typeof value !== 'number') return bad(c, 'bad_body', `${key}: a string (or a number)`);
      raw[key] = String(value);
    }
    const search = parseEventSearch(raw, { maxLimit: MAX_LIMIT });
    if (!search.ok) return bad(c, 'bad_body', search.message);
    const dryRun = dry_run !== false;
    if (!dryRun && settings.readOnly) return c.json({ error: 'read_only', message: 'admin is read-only (ADMIN_READ_ONLY=true); only dry runs are allowed' }, 403);
    if (!dryRun && !reason) return bad(c, 'reason_required', 'a bulk re-drive needs {"reason": "..."}');
    return inSearchSlot(c, c.get('actor'), slots, budget, async () =>
      c.json(await ops.bulkRedrive(search.filter, { dryRun, actor: c.get('actor'), reason: reason ?? 'dry run', signal: c.req.raw.signal })),
    );
  });
}
