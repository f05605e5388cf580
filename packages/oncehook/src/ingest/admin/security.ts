/**
 * The admin's defences against a hostile page in the operator's browser (CSRF, clickjacking):
 *
 * - Every state-changing request (anything but GET/HEAD/OPTIONS, Bull Board's included) is
 *   refused with 403 when the browser says it comes from another site (`Sec-Fetch-Site` other
 *   than `same-origin`/`none`) or its `Origin` is not the admin's own (ADMIN_ORIGINS, or the
 *   request's own host), and with 415 when it carries a body that is not declared
 *   `application/json`: a cross-site form (text/plain, urlencoded, multipart) cannot send
 *   JSON, and a cross-site `fetch` with JSON needs a CORS preflight, which is never granted.
 *   Scripts (curl with the bearer token) send neither header and are unaffected.
 * - Every admin response says `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`,
 *   `Referrer-Policy: no-referrer`, `Cache-Control: no-store`; HTML pages carry a strict
 *   Content-Security-Policy (scripts and styles from the admin itself only, no framing, forms
 *   posting only to the admin).
 */
import type { Context, MiddlewareHandler, Next } from 'hono';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Our own pages: nothing inline, nothing from elsewhere. */
const PAGE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";
/** Bull Board's page sets inline styles (its loading screen) and a <base href>. */
const BOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'";

export function securityHeaders(): MiddlewareHandler {
  return async (c: Context, next: Next) => {
    await next();
    const headers = c.res.headers;
    headers.set('X-Frame-Options', 'DENY');
    headers.set('X-Content-Type-Options', 'nosniff');
    headers.set('Referrer-Policy', 'no-referrer');
    if (!c.req.path.includes('/static/') && !c.req.path.startsWith('/admin/assets/')) headers.set('Cache-Control', 'no-store');
    if ((headers.get('content-type') ?? '').startsWith('text/html')) {
      headers.set('Content-Security-Policy', c.req.path.startsWith('/admin/queues') ? BOARD_CSP : PAGE_CSP);
    }
  };
}

/** The origins the admin is served from: ADMIN_ORIGINS when set, else the request's own host. */
function ownOrigin(c: Context, allowed: readonly string[], origin: string): boolean {
  if (allowed.length > 0) return allowed.includes(origin);
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false;
  }
  return host === c.req.header('host');
}

export function csrfGuard(allowedOrigins: readonly string[]): MiddlewareHandler {
  return async (c: Context, next: Next) => {
    if (SAFE_METHODS.has(c.req.method)) return next();
    const site = c.req.header('sec-fetch-site');
    const origin = c.req.header('origin');
    if ((site !== undefined && site !== 'same-origin' && site !== 'none') || (origin !== undefined && !ownOrigin(c, allowedOrigins, origin))) {
      return c.json(
        { error: 'cross_site_request', message: 'admin actions are accepted only from the admin itself (the request came from another site); see ADMIN_ORIGINS behind a proxy' },
        403,
      );
    }
    // A body of any other type, or of no declared type (a typeless Blob from `fetch` is a
    // "simple" request too), is refused. Body-less actions (Bull Board's retry, pause, clean)
    // carry no type; the origin checks above are what guard them.
    const type = c.req.header('content-type');
    const hasBody = c.req.header('transfer-encoding') !== undefined || Number(c.req.header('content-length') ?? '0') > 0;
    if ((type !== undefined || hasBody) && !/^application\/json\s*(;|$)/i.test(type ?? '')) {
      return c.json({ error: 'unsupported_media_type', message: 'admin actions take a JSON body (Content-Type: application/json)' }, 415);
    }
    return next();
  };
}
