/**
 * The `type` label of ingest's metrics (createTypeLabeler, @oncehook/shared type-label.ts): a
 * type some handler or destination names keeps its name; anything else counts as `other`.
 *
 * Which types are named: the workers publish what they load (`oncehook.handlers`, upserted at
 * each worker's start); ingest reads it at start and every `refreshMs`.
 */
import { createTypeLabeler, type Logger, type Pool, type TypeLabeler } from '@oncehook/shared';
import type { Queries } from '@oncehook/core';

export interface TypeLabels {
  /** The label for an event of this source, kind and type. */
  label(provider: string, kind: string, type: string): string;
  refresh(): Promise<void>;
  start(): void;
  stop(): void;
}

export function createTypeLabels(deps: { pool: Pool; queries: Queries; log: Logger; refreshMs?: number }): TypeLabels {
  let labeler: TypeLabeler = createTypeLabeler([]);
  let timer: NodeJS.Timeout | undefined;
  const refreshMs = deps.refreshMs ?? 30_000;
  const labels: TypeLabels = {
    label: (_provider, kind, type) => labeler(kind, type),
    async refresh() {
      try {
        labeler = createTypeLabeler(await deps.queries.listHandlers(deps.pool));
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
