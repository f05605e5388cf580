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
 * The notifier sends them off the reconciler's pass (a pass only wakes it): every due opening
 * at once, each try bounded by NOTIFY_TIMEOUT_MS, through the outbound guard (no link-local or
 * metadata address, no redirect). A try that fails is tried again by a later round, up to
 * NOTIFY_MAX_ATTEMPTS. At least once: the receiver dedupes on webhook-id.
 */
import { outboundFetch, type Logger, type OutboundPolicy, type Pool } from '@oncehook/shared';
import { signatureHeaders } from './destinations/forward.js';
import type { OpenedGroup, Queries } from './store/queries.js';

export interface FailureNotifySettings {
  url: string;
  /** The HMAC key of FAILURE_NOTIFY_SECRET (destinationHmacKey). */
  hmacKey: Buffer;
  /** The admin's URL for links in the notification (ADMIN_PUBLIC_URL); absent: no link. */
  adminUrl?: string;
  /** Tests: the resolver the guard uses. */
  policy?: OutboundPolicy;
}

/** One try of one notification: short, since a round waits for its slowest try. */
export const NOTIFY_TIMEOUT_MS = 3_000;
export const NOTIFY_MAX_ATTEMPTS = 20;
/** Openings tried at once per round (each one connection). */
const NOTIFY_PER_ROUND = 20;

/** Logs the groups a pass opened (a listener of `reconciler:led`; worker-metrics.ts counts them). */
export function logOpened(opened: OpenedGroup[], log: Logger): void {
  for (const g of opened) {
    log.warn({ group: g.id, handler: g.handler, runs: g.runs, shape: g.shape, sampleEvent: g.sampleEvent }, `failure group opened: ${g.handler}: ${g.shape}`);
  }
}

/** Sends the notifications of opened failure groups, apart from the reconciler's pass. */
export interface FailureNotifier {
  /** Starts a round unless one is running (then one more follows it). Returns at once. */
  wake(): void;
  /** One round: every due opening (up to NOTIFY_PER_ROUND) tried at once; resolves with how many were delivered. */
  runOnce(): Promise<number>;
  /** Resolves once no round is running or asked for. */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

export function createFailureNotifier(deps: { pool: Pool; queries: Queries; log: Logger; notify: FailureNotifySettings }): FailureNotifier {
  let running: Promise<unknown> | null = null;
  let again = false;
  let stopped = false;
  const round = () => notifyOpenedGroups(deps);
  const notifier: FailureNotifier = {
    wake() {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      running = round()
        .catch((error: unknown) => deps.log.warn({ err: error }, 'failure group notifications not sent; retrying next round'))
        .finally(() => {
          running = null;
          if (again && !stopped) {
            again = false;
            notifier.wake();
          }
        });
    },
    runOnce: round,
    async idle() {
      while (running) await running;
    },
    async stop() {
      stopped = true;
      await notifier.idle();
    },
  };
  return notifier;
}

/** Tries every due notification at once (after the pass's commit). Returns how many were delivered. */
export async function notifyOpenedGroups(deps: { pool: Pool; queries: Queries; log: Logger; notify: FailureNotifySettings }): Promise<number> {
  const { pool, queries, log, notify } = deps;
  const due = await queries.unnotifiedFailureGroups(pool, NOTIFY_PER_ROUND, NOTIFY_MAX_ATTEMPTS);
  // mutant: notify-one-at-a-time
  const delivered = await Promise.all(
    due.map(async (group) => {
      const ok = await sendOne(notify, group, log);
      await queries.failureGroupNotifyTried(pool, group, ok);
      return ok;
    }),
  );
  return delivered.filter(Boolean).length;
}

async function sendOne(notify: FailureNotifySettings, group: { id: string; handler: string; shape: string; runs: number; openedAt: Date }, log: Logger): Promise<boolean> {
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
  try {
    const response = await outboundFetch(notify.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signatureHeaders({ hmacKey: notify.hmacKey, signingKey: null }, id, body, Math.floor(Date.now() / 1000)) },
      body,
      signal: AbortSignal.timeout(NOTIFY_TIMEOUT_MS),
      policy: notify.policy,
    });
    await response.body?.cancel().catch(() => {});
    const ok = response.status >= 200 && response.status < 300;
    if (!ok) log.warn({ group: group.id, status: response.status }, 'failure group notification refused; a later round tries again');
    return ok;
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause;
    log.warn({ group: group.id, error: cause?.message ?? (error as Error).message }, 'failure group notification failed; a later round tries again');
    return false;
  }
}
