/**
 * Admin, mounted under /admin only when credentials are configured, all of it behind one
 * authentication check (no admin route is reachable without it):
 *
 *   /admin/queues/...        the jobs: Bull Board on Redis (read-only when ADMIN_READ_ONLY),
 *                            a page over the queue's table on Postgres (queue-page.ts)
 *   /admin/events, /:id      the events view (views.ts), failures, pauses, destinations
 *   /admin/activity          the pictures (activity-page.ts)
 *   /admin/handlers, /:name  each handler and destination (handler-pages.ts)
 *   /admin/api/...           the admin JSON API (api.ts)
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import { bullQueueOf, createOperations, PostgresEventQueue, queuesOf, type EventJobData, type JobTarget, type Queries } from '@oncehook/core';
import type { Queue } from 'bullmq';
import type { Logger, Pool } from '@oncehook/shared';
import type { Hono } from 'hono';
import { RecentDuplicates } from '../recent-duplicates.js';
import { mountAdminApi } from './api.js';
import { adminAuth, adminConfigured, type AdminEnv, type AdminSettings } from './auth.js';
import { answerAdminFailures, createSearchSlots, DEFAULT_ADMIN_BUDGET } from './budget.js';
import { csrfGuard, securityHeaders } from './security.js';
import { mountActivity } from './activity-page.js';
import { mountHandlerPages } from './handler-pages.js';
import { mountAdminViews, page } from './views.js';
import { mountQueuePage } from './queue-page.js';

export type { AdminSettings } from './auth.js';

/** What the admin reads and acts on: the database (through its OWN pool), the queue, the duplicates ingest saw. */
export interface AdminDeps {
  /** The admin's pool (build-ingest.ts: ADMIN_POOL_SIZE and its timeouts), never ingest's. */
  pool: Pool;
  queries: Queries;
  queue: JobTarget;
  log: Logger;
  recentDuplicates?: RecentDuplicates;
}

export function mountAdmin(app: Hono, deps: AdminDeps, settings: AdminSettings): boolean {
  if (!adminConfigured(settings)) return false;
  const budget = settings.budget ?? DEFAULT_ADMIN_BUDGET;
  const ops = createOperations({ pool: deps.pool, queries: deps.queries, queue: deps.queue, searchTimeoutMs: budget.statementTimeoutMs });
  const slots = createSearchSlots(budget.searchesPerUser);
  const admin = app.basePath('/admin') as unknown as Hono<AdminEnv>;
  admin.use('*', securityHeaders());
  // mutant: csrf-guard-off
  admin.use('*', csrfGuard(settings.origins ?? []));
  admin.use('*', adminAuth(settings, deps.log));
  // A busy, slow or unavailable database is a 503 or 422 naming why, never a 500.
  admin.use('*', answerAdminFailures(budget));
  // `/admin/` as `/admin` (behind the same guards: registered after them).
  app.get('/admin/', (c) => c.redirect('/admin/events', 302));

  // The queue's jobs: Bull Board on Redis; on Postgres, a page over the queue's table.
  const queues = queuesOf(deps.queue);
  const bullQueues = queues.map(bullQueueOf).filter((queue) => queue !== undefined);
  if (bullQueues.length === queues.length) mountBullBoard(admin, bullQueues, settings);
  // The page reads the queue's table through the admin's pool (its statement timeout and
  // connections), never through the pool ingest enqueues with.
  // mutant: admin-queue-page-on-queue-pool
  else mountQueuePage(admin, { queues: queues.filter((queue) => queue instanceof PostgresEventQueue).map((queue) => queue.through(deps.pool)), page });

  mountAdminApi(admin, { ops, slots, budget }, settings);
  mountActivity(admin, { ops, page: (title, body) => page(title, body) });
  mountHandlerPages(admin, { ops, page }, settings);
  mountAdminViews(admin, { pool: deps.pool, queries: deps.queries, ops, slots, budget, recentDuplicates: deps.recentDuplicates ?? new RecentDuplicates() }, settings);
  return true;
}

/** Bull Board under /admin/queues, one entry per shard (QUEUE_SHARDS). */
function mountBullBoard(admin: Hono<AdminEnv>, queues: Queue<EventJobData>[], settings: AdminSettings): void {
  const board = new HonoAdapter(serveStatic);
  createBullBoard({
    queues: queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: settings.readOnly })),
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'Oncehook jobs' } },
  });
  board.setBasePath('/admin/queues');
  // Bull Board's page asks Google for its fonts: nothing the admin serves reaches off the
  // machine (the page falls back to system fonts).
  admin.use('/queues/*', async (c, next) => {
    await next();
    if (!(c.res.headers.get('content-type') ?? '').startsWith('text/html')) return;
    const page = (await c.res.text()).replace(/<link[^>]+fonts\.googleapis\.com[^>]*>/g, '');
    c.res = new Response(page, { status: c.res.status, headers: c.res.headers });
  });
  admin.route('/queues', board.registerPlugin());
}
