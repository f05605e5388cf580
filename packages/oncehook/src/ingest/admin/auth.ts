/**
 * Admin authentication: `Authorization: Bearer <token>` (scripts: ADMIN_TOKEN, or a named one
 * of ADMIN_TOKENS) or HTTP basic with ADMIN_USERNAME/ADMIN_PASSWORD (browsers prompt for it),
 * through Hono's bearerAuth and basicAuth, with secrets compared in constant time over sha256
 * digests (hmac.ts secretsEqual). The actor recorded with an operator action is who acted: the
 * basic-auth user, `token:<name>` for a named token, `token` for ADMIN_TOKEN.
 *
 * Failed logins are logged (the client's address and the user name tried, never a password or
 * token; at most 5 lines per client per 10 s) and throttled per client address: past
 * ADMIN_LOGIN_FAILURES_PER_MINUTE failures in a minute, that address gets 429 until the minute
 * is over, before any credential is compared. Behind a proxy every client has the proxy's
 * address: a flood of wrong passwords then makes everyone wait out the minute (chosen over
 * trusting a forwarded header an attacker can write).
 */
import type { Destination } from '@oncehook/core';
import { getConnInfo } from '@hono/node-server/conninfo';
import { createLogLimiter, type Logger } from '@oncehook/shared';
import { secretsEqual } from '@oncehook/providers';
import type { Context, MiddlewareHandler } from 'hono';
import { basicAuth } from 'hono/basic-auth';
import { bearerAuth } from 'hono/bearer-auth';
import { HTTPException } from 'hono/http-exception';
import type { AdminBudget } from './budget.js';

export interface AdminSettings {
  token?: string;
  /** Named tokens (ADMIN_TOKENS): the name is recorded as the actor. */
  tokens?: { label: string; token: string }[];
  username?: string;
  password?: string;
  readOnly: boolean;
  /** Origins the admin is served from (ADMIN_ORIGINS), for the cross-site check behind a proxy; default: the request's host. */
  origins?: string[];
  /** The destinations of this environment (docs/destinations.md), or what is wrong with their configuration. */
  destinations?: readonly Destination[] | string;
  /** Pool, timeouts, searches and login failures (budget.ts); DEFAULT_ADMIN_BUDGET when absent. */
  budget?: AdminBudget;
}

export type AdminEnv = { Variables: { actor: string } };

const UNAUTHORIZED = { error: 'unauthorized', message: 'admin routes need Authorization: Bearer <ADMIN_TOKEN> or basic auth' };

export function adminConfigured(settings: AdminSettings): boolean {
  return Boolean(settings.token || settings.tokens?.length || (settings.username && settings.password));
}

/** Where a request comes from (the socket's address); `unknown` for a request with no socket (app.request in tests). */
function clientOf(c: Context): string {
  try {
    return getConnInfo(c).remote.address ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Failed logins per client address in the current minute (at most 10,000 addresses tracked; the oldest forgotten first). */
function createLoginThrottle(perMinute: number, now = Date.now) {
  const windows = new Map<string, { start: number; failures: number }>();
  const current = (client: string) => {
    const w = windows.get(client);
    return w && now() - w.start < 60_000 ? w : null;
  };
  return {
    /** Seconds left to wait, or 0 when this client may try. */
    waitSeconds(client: string): number {
      const w = current(client);
      // mutant: login-unthrottled
      return w && w.failures >= perMinute ? Math.max(1, Math.ceil((w.start + 60_000 - now()) / 1000)) : 0;
    },
    failed(client: string): number {
      let w = current(client);
      if (!w) {
        if (windows.size >= 10_000) windows.delete(windows.keys().next().value as string);
        w = { start: now(), failures: 0 };
        windows.set(client, w);
      }
      w.failures += 1;
      return w.failures;
    },
  };
}

/** The user name a failed basic-auth request tried, printable and short, for the log (never the password). */
function triedUser(header: string): string | null {
  const match = /^basic\s+(\S+)/i.exec(header);
  if (!match) return null;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const user = decoded.includes(':') ? decoded.slice(0, decoded.indexOf(':')) : '';
  return user.replace(/[^\x20-\x7e]/g, '?').slice(0, 64);
}

export function adminAuth(settings: AdminSettings, log?: Logger): MiddlewareHandler<AdminEnv> {
  const throttle = createLoginThrottle(settings.budget?.loginFailuresPerMinute ?? 10);
  const logLimit = createLogLimiter({ windowMs: 10_000, perWindow: 5, maxKeys: 10_000 });
  const { username, password } = settings;
  const tokens = [...(settings.token ? [{ label: null, token: settings.token }] : []), ...(settings.tokens ?? [])];
  const bearer =
    tokens.length > 0
      ? bearerAuth({
          verifyToken: (received, c) => {
            // Every token compared, always (constant time each): timing tells nothing.
            const matches = tokens.filter((t) => secretsEqual(t.token, received));
            const match = matches[0];
            if (!match) return false;
            (c as unknown as Context<AdminEnv>).set('actor', match.label === null ? 'token' : `token:${match.label}`);
            return true;
          },
          noAuthenticationHeaderMessage: UNAUTHORIZED,
          invalidAuthenticationHeaderMessage: UNAUTHORIZED,
          invalidTokenMessage: UNAUTHORIZED,
        })
      : null;
  const basic =
    username && password
      ? basicAuth({
          realm: 'oncehook admin',
          verifyUser: (user, pass, c) => {
            // Both compared, always, so timing does not tell which one was wrong.
            const userOk = secretsEqual(username, user);
            const passOk = secretsEqual(password, pass);
            if (!(userOk && passOk)) return false;
            (c as unknown as Context<AdminEnv>).set('actor', user);
            return true;
          },
          invalidUserMessage: UNAUTHORIZED,
        })
      : null;
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    // Hono's built-ins are typed for the default Env; the variables they set are ours.
    const plain = c as unknown as Context;
    const client = clientOf(plain);
    const wait = throttle.waitSeconds(client);
    if (wait > 0) {
      return c.json({ error: 'too_many_failed_logins', message: `too many failed admin logins from this address; try again in ${wait} s` }, 429, { 'Retry-After': String(wait) });
    }
    try {
      if (bearer && (/^bearer /i.test(header) || !basic)) return await bearer(plain, next);
      return await basic!(plain, next);
    } catch (error) {
      // The built-ins throw a 401 before calling next: a failed login (a route's own errors never get here).
      if (error instanceof HTTPException && error.status === 401 && header !== '') {
        const failures = throttle.failed(client);
        const { log: write, suppressed } = logLimit(client);
        if (write) log?.warn({ client, user: triedUser(header), scheme: /^bearer /i.test(header) ? 'bearer' : 'basic', failures, suppressed }, 'admin login failed');
      }
      throw error;
    }
  };
}
