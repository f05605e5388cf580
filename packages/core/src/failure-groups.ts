/**
 * Failure groups as the reconciler's leader watches them (store: FAILURE_GROUPS and
 * OPEN_FAILURE_GROUPS in store/sql/operators.ts). Each pass, in its transaction, a group with
 * no failing run left is closed and a group that is new, or fails again after it closed or was
 * resolved, is opened: each opening is counted (oncehook_failure_groups_opened_total, the
 * OncehookFailureGroupOpened alert), logged, and, with FAILURE_NOTIFY_URL, notified once.
 *
 * The notification is a Standard Webhooks POST (the same signature as destinations: `v1,` HMAC
 * over `<webhook-id>.<timestamp>.<body>` with FAILURE_NOTIFY_SECRET), its `webhook-id` the same
 * on every try of one opening (`fg_<group>_<opened at, ms>`), so a receiver can drop a repeat.
 * Sent after the pass's commit; a try that fails (no 2xx in 5 s) is tried again by later passes,
 * up to NOTIFY_MAX_ATTEMPTS. At least once: the receiver dedupes on webhook-id.
 */
import type { Logger, Pool, WorkerMetrics } from '@oncehook/shared';
import { signatureHeaders } from './destinations/forward.js';
import type { OpenedGroup, Queries } from './store/queries.js';

export interface FailureNotifySettings {
  url: string;
  /** The HMAC key of FAILURE_NOTIFY_SECRET (destinationHmacKey). */
  hmacKey: Buffer;
  /** The admin's URL for links in the notification (ADMIN_PUBLIC_URL); absent: no link. */
  adminUrl?: string;
}

export const NOTIFY_TIMEOUT_MS = 5_000;
export const NOTIFY_MAX_ATTEMPTS = 20;
const NOTIFY_PER_PASS = 10;

/** Counts and logs the groups a pass opened. */
export function reportOpened(opened: OpenedGroup[], log: Logger, metrics?: WorkerMetrics): void {
  for (const g of opened) {
    metrics?.failureGroupsOpened.inc({ handler: g.handler });
    log.warn({ group: g.id, handler: g.handler, runs: g.runs, shape: g.shape, sampleEvent: g.sampleEvent }, `failure group opened: ${g.handler}: ${g.shape}`);
  }
}

/** Tries to notify the opened groups not notified yet (after the pass's commit). Returns how many were delivered. */
export async function notifyOpenedGroups(deps: { pool: Pool; queries: Queries; log: Logger; notify: FailureNotifySettings }): Promise<number> {
  const { pool, queries, log, notify } = deps;
  let delivered = 0;
  for (const group of await queries.unnotifiedFailureGroups(pool, NOTIFY_PER_PASS, NOTIFY_MAX_ATTEMPTS)) {
    const body = JSON.stringify({
      type: 'failure_group.opened',
      timestamp: new Date().toISOString(),
      data: {
        id: group.id,
        handler: group.handler,
        shape: group.shape,
        runs: group.runs,
        opened_at: group.openedAt.toISOString(),
        ...(notify.adminUrl ? { url: `${notify.adminUrl.replace(/\/$/, '')}/admin/events?group=${group.id}&handler=${encodeURIComponent(group.handler)}` } : {}),
      },
    });
    const id = `fg_${group.id}_${group.openedAt.getTime()}`;
    let ok = false;
    try {
      const response = await fetch(notify.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signatureHeaders({ hmacKey: notify.hmacKey, signingKey: null }, id, body, Math.floor(Date.now() / 1000)) },
        body,
        signal: AbortSignal.timeout(NOTIFY_TIMEOUT_MS),
        redirect: 'manual',
      });
      ok = response.status >= 200 && response.status < 300;
      await response.body?.cancel();
      if (!ok) log.warn({ group: group.id, status: response.status }, 'failure group notification refused; a later pass tries again');
    } catch (error) {
      log.warn({ err: error, group: group.id }, 'failure group notification failed; a later pass tries again');
    }
    await queries.failureGroupNotifyTried(pool, group, ok);
    if (ok) delivered += 1;
  }
  return delivered;
}
