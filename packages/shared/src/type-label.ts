/**
 * The `type` label of every metric that has one (ingest's webhook_events_total, the worker's
 * processed/duration/unhandled series), bounded the same way everywhere: a type some handler or
 * destination NAMES keeps its name; everything else is `other`. Event types come from signed
 * bodies and from unsigned headers; whoever sends them must not be able to add series.
 *
 * - A destination's globs (`invoice.*`, `*`) name no type: events they take count as `other`
 *   unless a type is also named exactly (a glob covers an unbounded set).
 * - A GitHub handler for an event name without an action (`issues`) names that event: its
 *   `issues.<action>` events are labelled `issues` (the action comes from the body, and a
 *   label per action would be a series per string the sender writes).
 * - No "first N types seen" rule: junk arriving first would take the slots.
 */
export const OTHER_TYPE = 'other';

/** What handlers and destinations name: their `type` (a destination's comma-separated list of types and globs). */
export interface NamedType {
  type: string;
}

export type TypeLabeler = (kind: string, type: string) => string;

export function createTypeLabeler(named: Iterable<NamedType>): TypeLabeler {
  const exact = new Set<string>();
  for (const { type } of named) for (const one of type.split(',')) if (one !== '' && !one.includes('*')) exact.add(one.trim());
  return (kind, type) => {
    if (exact.has(type)) return type;
    if (kind === 'github') {
      const dot = type.indexOf('.');
      if (dot > 0 && exact.has(type.slice(0, dot))) return type.slice(0, dot);
    }
    // mutant: type-label-unbounded
    return OTHER_TYPE;
  };
}
