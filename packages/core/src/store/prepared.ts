/**
 * Named prepared statements for the worker's hot path (one run's lease, steps and verdict):
 * Postgres parses and plans each once per connection instead of once per execution (pg keeps
 * the name per connection). The name carries a hash of the text, so two schemas (or two
 * versions of a statement) never share one. Only for statements whose every parameter is
 * matched through a unique index, where a generic plan is the custom plan: the claim is NOT
 * prepared (a generic plan for its duplicate lookup was O(events); see claim.ts).
 *
 * Postgres keeps the generic plan only if it is priced no higher than the first five plans for
 * values; an array unnested straight from a parameter is priced at its real length in those and
 * at 10 in the generic one, which is then never kept (the statement is planned at every
 * execution). Read such arrays through a materialized CTE (sql/runs.ts, DISPATCH_AND_LEASE);
 * test/round-trips.test.ts checks the hot paths' statements for their generic plans.
 */
import { createHash } from 'node:crypto';
import type { PreparedStatement } from '@oncehook/shared';

export function prepared(name: string, text: string): (values: unknown[]) => PreparedStatement {
  const full = `oncehook_${name}_${createHash('sha256').update(text).digest('hex').slice(0, 12)}`;
  return (values) => ({ name: full, text, values });
}

const PREPARED_NAME = /^oncehook_(.+)_[0-9a-f]{12}$/;

/** The name a statement has in the code (`dispatchAndLease`) from its name on a connection (pg_prepared_statements); null when `prepared` did not make it. */
export function preparedBaseName(connectionName: string): string | null {
  return PREPARED_NAME.exec(connectionName)?.[1] ?? null;
}
