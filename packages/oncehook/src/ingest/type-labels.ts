/**
 * The `type` label of ingest's metrics, bounded: a type some loaded handler is registered for
 * keeps its name; anything else counts as `other`. Event types come from signed bodies, but
 * also from unsigned headers (GitHub, Shopify), so without a bound one captured body resent
 * with made-up types would create a series per type.
 *
 * Which types have handlers: the workers publish what they load (`oncehook.handlers`, upserted
 * at each worker's start); ingest reads it at start and every `refreshMs`.
 */
import type { Logger, Pool } from '@oncehook/shared';
import type { Queries } from '@oncehook/core';

export const OTHER_TYPE = 'other';

export interface TypeLabels {
  /** The label for an event of this source, kind and type. */
  label(provider: string, kind: string, type: string): string;
  refresh(): Promise<void>;
  start(): void;
  stop(): void;
}

export function createTypeLabels(deps: { pool: Pool; queries: Queries; log: Logger; refreshMs?: number }): TypeLabels {
  let handled: { source: string; type: string }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const refreshMs = deps.refreshMs ?? 30_000;
  const labels: TypeLabels = {
    label(provider, kind, type) {
      const known = handled.some(
        (h) => (h.source === provider || h.source === kind) && (h.type === type || (kind === 'github' && !h.type.includes('.') && type.startsWith(`${h.type}.`))),
      );
      return known ? type : OTHER_TYPE;
    },
    async refresh() {
      try {
        handled = (await deps.queries.listHandlers(deps.pool)).map((h) => ({ source: h.source, type: h.type }));
      } catch (error) {
        deps.log.debug({ err: error }, 'could not refresh the handled types; keeping the last list');
      }
    },
    start() {
      timer = setInterval(() => void labels.refresh(), refreshMs);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
    },
  };
  return labels;
}
