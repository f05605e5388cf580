/** What every `npm run attack` scenario starts from: an ingest process of a checkout, its environment, counts and SQL. */
import { randomBytes } from 'node:crypto';
import { REDIS_URL, SECRETS, type Service, spawnService, STRIPE_SECRET } from '@oncehook/harness';
import pg from 'pg';

/** A scenario: runs against a migrated scratch database, with the ingest (and worker) of `root` (default: this checkout); returns one line of figures. */
export type ScenarioRun = (root: string | undefined, databaseUrl: string) => Promise<string>;

export function env(databaseUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL,
    QUEUE_PREFIX: `attack-${randomBytes(4).toString('hex')}`,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    GITHUB_WEBHOOK_SECRET: SECRETS.github,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  };
}

export async function startIngest(root: string | undefined, databaseUrl: string, extra: Record<string, string> = {}): Promise<{ ingest: Service; url: string; port: number }> {
  const ingest = spawnService('ingest', { ...env(databaseUrl), ...extra }, [], { root });
  const line = await ingest.waitFor(/ingest listening on \d+/);
  const port = Number(/listening on (\d+)/.exec(line)?.[1]);
  return { ingest, url: `http://127.0.0.1:${port}`, port };
}

export function count<T extends { status: number }>(answers: T[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const a of answers) out[a.status] = (out[a.status] ?? 0) + 1;
  return out;
}

/** One SQL query on the attack's database. */
export async function sql<R extends Record<string, unknown>>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

export async function countRows(url: string): Promise<number> {
  return (await sql<{ n: number }>(url, 'SELECT count(*)::int AS n FROM oncehook.events'))[0]?.n ?? -1;
}

/** p50 / p99 / max of a list of milliseconds, as text. */
export function spread(ms: number[]): string {
  if (ms.length === 0) return 'none';
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return `p50 ${at(0.5).toFixed(0)} ms, p99 ${at(0.99).toFixed(0)} ms, max ${sorted[sorted.length - 1]!.toFixed(0)} ms`;
}
