/**
 * checkHandler's scratch databases: named, created, kept and removed here.
 *
 * A name is `<prefix><created>_<tag>_<suffix>`: the prefix (`oncehook_check_` unless
 * `databasePrefix` or ONCEHOOK_CHECK_DATABASE_PREFIX says otherwise, so a shared database server
 * can give each team or CI job its own), the database server's own clock in seconds (base 36, so
 * no host's clock is trusted), the check's random tag, then `tpl` or the scenario's number.
 *
 * A check drops what it created when it ends. A check that never ends (its process killed
 * mid-way) leaves its databases; the next check on the same server with the same prefix drops
 * those older than STALE_AFTER_SECONDS, which no check lasts, unless they were kept on purpose
 * (`keepDatabases` marks them with a comment).
 */
import { withAdminConnection } from '@oncehook/shared';
import type pg from 'pg';

export const DEFAULT_DATABASE_PREFIX = 'oncehook_check_';

/** A check lasts seconds to a few minutes; a database this old belongs to a check that died. */
export const STALE_AFTER_SECONDS = 3_600;

/** The comment that marks a database kept on purpose (never removed as a leftover). */
const KEPT = 'kept by checkHandler (keepDatabases): drop it yourself when done';

/** Lower-case letters, digits and underscores, starting with a letter: a name that needs no quoting. */
const PREFIX_SHAPE = /^[a-z][a-z0-9_]{0,29}$/;

export function databasePrefix(given: string | undefined): string {
  const prefix = given ?? process.env.ONCEHOOK_CHECK_DATABASE_PREFIX ?? DEFAULT_DATABASE_PREFIX;
  if (!PREFIX_SHAPE.test(prefix)) {
    throw new Error(
      `checkHandler: the scratch database prefix ${JSON.stringify(prefix)} (databasePrefix or ONCEHOOK_CHECK_DATABASE_PREFIX) must be 1 to 30 lower-case letters, digits or underscores, starting with a letter, e.g. "ci_job42_check_"`,
    );
  }
  return prefix;
}

/** The server part of a Postgres URL (the database part is ignored). */
export function serverUrl(given: string | undefined): string {
  const url = new URL(given ?? process.env.ONCEHOOK_CHECK_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  url.pathname = '';
  return url.toString().replace(/\/$/, '');
}

/** One short connection to the server's `postgres` database, for CREATE and DROP DATABASE. */
export function withAdmin<T>(server: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  return withAdminConnection(`${server}/postgres`, fn);
}

/** The scratch databases of one check: the stem of every name, and what it created. */
export interface ScratchDatabases {
  /** Every database this check created, template first. */
  readonly names: string[];
  /** Creates `<stem>_<suffix>` (from `template` if given) and returns its name. */
  create(suffix: string, template?: string): Promise<string>;
  /** Drops what this check created, or marks it kept. */
  finish(keep: boolean): Promise<void>;
}

/**
 * Starts a check's databases: removes the stale leftovers of earlier checks with the same prefix
 * (returned, so the report names them), and reads the server's clock for the names.
 */
export async function openScratchDatabases(server: string, prefix: string, tag: string): Promise<{ scratch: ScratchDatabases; removedLeftovers: string[] }> {
  const { stem, removedLeftovers } = await withAdmin(server, async (c) => {
    const now = await c.query<{ seconds: string }>('SELECT floor(extract(epoch FROM now()))::bigint::text AS seconds');
    const seconds = Number(now.rows[0]!.seconds);
    const candidates = await c.query<{ datname: string; comment: string | null }>(
      `SELECT datname, shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE starts_with(datname, $1::text)`,
      [prefix],
    );
    const removed: string[] = [];
    for (const { datname, comment } of candidates.rows) {
      if (comment === KEPT) continue;
      const created = createdAt(datname, prefix);
      if (created === null || seconds - created < STALE_AFTER_SECONDS) continue;
      await c.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      removed.push(datname);
    }
    return { stem: `${prefix}${seconds.toString(36)}_${tag}`, removedLeftovers: removed };
  });
  const names: string[] = [];
  const scratch: ScratchDatabases = {
    names,
    async create(suffix, template) {
      const name = `${stem}_${suffix}`;
      // Pushed before it exists: a CREATE that fails half-way is still dropped (IF EXISTS).
      names.push(name);
      await withAdmin(server, (c) => c.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`));
      return name;
    },
    async finish(keep) {
      await withAdmin(server, async (c) => {
        for (const name of [...names].reverse()) {
          if (keep) await c.query(`COMMENT ON DATABASE ${name} IS '${KEPT}'`);
          else await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        }
      });
    },
  };
  return { scratch, removedLeftovers };
}

/** The creation time (server seconds) a scratch database's name carries, or null if not one of ours. */
function createdAt(datname: string, prefix: string): number | null {
  const match = /^([0-9a-z]+)_[0-9a-f]{8}_(tpl|\d+)$/.exec(datname.slice(prefix.length));
  return match ? Number.parseInt(match[1]!, 36) : null;
}
