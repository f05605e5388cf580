/**
 * Admin authentication: `Authorization: Bearer <token>` (scripts: ADMIN_TOKEN, or a named one
 * of ADMIN_TOKENS) or HTTP basic with ADMIN_USERNAME/ADMIN_PASSWORD (browsers prompt for it),
 * through Hono's bearerAuth and basicAuth, with secrets compared in constant time over sha256
 * digests (hmac.ts secretsEqual). The actor recorded with an operator action is who acted: the
 * basic-auth user, `token:<name>` for a named token, `token` for ADMIN_TOKEN.
 */
import { secretsEqual, type Destination } from '@oncehook/shared';
import type { Context, MiddlewareHandler } from 'hono';
import { basicAuth } from 'hono/basic-auth';
import { bearerAuth } from 'hono/bearer-auth';

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
}

export type AdminEnv = { Variables: { actor: string } };

const UNAUTHORIZED = { error: 'unauthorized', message: 'admin routes need Authorization: Bearer <ADMIN_TOKEN> or basic auth' };

export function adminConfigured(settings: AdminSettings): boolean {
  return Boolean(settings.token || settings.tokens?.length || (settings.username && settings.password));
}

export function adminAuth(settings: AdminSettings): MiddlewareHandler<AdminEnv> {
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
    if (bearer && (/^bearer /i.test(header) || !basic)) return bearer(plain, next);
    return basic!(plain, next);
  };
}
