/**
 * Admin authentication: `Authorization: Bearer <ADMIN_TOKEN>` (scripts) or HTTP basic with
 * ADMIN_USERNAME/ADMIN_PASSWORD (browsers prompt for it), through Hono's bearerAuth and
 * basicAuth, with secrets compared in constant time over sha256 digests (hmac.ts
 * secretsEqual). The actor recorded with an operator action is the basic-auth user, or
 * "token".
 */
import { secretsEqual } from '@oncehook/shared';
import type { Context, MiddlewareHandler } from 'hono';
import { basicAuth } from 'hono/basic-auth';
import { bearerAuth } from 'hono/bearer-auth';

export interface AdminSettings {
  token?: string;
  username?: string;
  password?: string;
  readOnly: boolean;
  /** Origins the admin is served from (ADMIN_ORIGINS), for the cross-site check behind a proxy; default: the request's host. */
  origins?: string[];
}

export type AdminEnv = { Variables: { actor: string } };

const UNAUTHORIZED = { error: 'unauthorized', message: 'admin routes need Authorization: Bearer <ADMIN_TOKEN> or basic auth' };

export function adminConfigured(settings: AdminSettings): boolean {
  return Boolean(settings.token || (settings.username && settings.password));
}

export function adminAuth(settings: AdminSettings): MiddlewareHandler<AdminEnv> {
  const { token, username, password } = settings;
  const bearer = token
    ? bearerAuth({
        verifyToken: (received, c) => {
          if (!secretsEqual(token, received)) return false;
          (c as unknown as Context<AdminEnv>).set('actor', 'token');
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
