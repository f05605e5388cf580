/**
 * The Postgres schema that holds Oncehook's own tables (`oncehook` by default, ONCEHOOK_SCHEMA
 * to change it), so they never mix with the application's tables. Every framework statement
 * names it explicitly; nothing relies on search_path (handler transactions share connections
 * with the application's own SQL).
 */
export const DEFAULT_SCHEMA = 'oncehook';

/** Lowercase identifiers only: no quoting surprises, and the name is also part of lock keys. */
export const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

/** The schema as it appears in SQL (validated, so it needs no quoting). */
export function schemaIdentifier(schema: string): string {
  if (!SCHEMA_NAME_PATTERN.test(schema)) throw new Error(`invalid schema name "${schema}": use 1-63 characters of a-z 0-9 _ (starting with a letter or _)`);
  return schema;
}
