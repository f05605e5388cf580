/**
 * The jobs page on QUEUE_BACKEND=postgres (`/admin/queues`, where Bull Board is on Redis):
 * each queue's waiting and delayed jobs, and the next 50 a worker will take, read from the
 * queue's table (core postgres-queue.ts). Read-only: a job there only carries work (the events
 * view acts on the events; a re-drive enqueues again). A job a worker took is no longer a row,
 * so there is no active, completed or failed list here: the events view has every event's
 * history and each run's error. It reads through the admin's own pool (index.ts): its statement
 * timeout bounds it, and it never takes a connection ingest enqueues through; its counts stop at
 * QUEUE_COUNT_CAP (shown as "100,000+").
 */
import { QUEUE_COUNT_CAP, type PostgresEventQueue } from '@oncehook/core';
import type { Hono } from 'hono';
import { html } from 'hono/html';
import type { AdminEnv } from './auth.js';

/** How many of each queue's next jobs the page lists. */
export const QUEUE_PAGE_JOBS = 50;

/** A count, with the cap of the queue's counts said as "at least" (QUEUE_COUNT_CAP). */
function countOf(n: number | undefined): string {
  return (n ?? 0) >= QUEUE_COUNT_CAP ? `${QUEUE_COUNT_CAP.toLocaleString('en-US')}+` : String(n ?? 0);
}

export function mountQueuePage(
  admin: Hono<AdminEnv>,
  deps: { queues: readonly PostgresEventQueue[]; page: (title: string, body: ReturnType<typeof html>) => ReturnType<typeof html> },
): void {
  admin.get('/queues', async (c) => {
    const queues = await Promise.all(
      deps.queues.map(async (queue) => ({
        name: queue.name,
        counts: await queue.getJobCounts('waiting', 'delayed'),
        next: await queue.nextJobs(QUEUE_PAGE_JOBS),
      })),
    );
    return c.html(
      deps.page(
        'Jobs',
        html`<p class="muted">The queue is a table in Postgres (QUEUE_BACKEND=postgres): a job is a row while it waits and is deleted when a worker takes it. The events view has every event's history.</p>
${queues.map(
  (queue) => html`<h2>${queue.name}</h2><p>${countOf(queue.counts.waiting)} waiting, ${countOf(queue.counts.delayed)} delayed</p>
${
  queue.next.length === 0
    ? html`<p class="muted">No job waits.</p>`
    : html`<table><tr><th>Job</th><th>Event</th><th>Run</th><th>Due</th><th>Priority</th></tr>
${queue.next.map(
  (
    job,
  ) => html`<tr><td><code>${job.id}</code></td><td>${job.data.rowId ? html`<a href="/admin/events/${job.data.rowId}">${job.data.rowId}</a>` : ''} <code>${job.data.source}/${job.data.eventId}</code></td>
<td>${job.data.handler ? `${job.data.handler}, attempt ${job.data.attempt ?? 1}` : 'dispatch'}</td><td>${new Date(job.timestamp + (job.opts.delay ?? 0)).toISOString()}</td><td>${job.opts.priority ?? '-'}</td></tr>`,
)}</table>`
}`,
)}`,
      ),
    );
  });
}
