/** Where tests find Postgres and Redis: the machine's shared servers unless overridden. */
export const PG_BASE_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';
export const ADMIN_URL = `${PG_BASE_URL}/postgres`;
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export function urlFor(database: string, base = PG_BASE_URL): string {
  return `${base}/${database}`;
}
