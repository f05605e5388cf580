/**
 * The handlers a worker runs, looked up by event and by name.
 *
 * Matching: a handler registered for a source NAME (`stripe-eu`) receives that source's
 * events; one registered for a KIND (`stripe`) receives the events of every source of that
 * kind. Every matching handler gets its own run of the event (per-handler exactly once).
 * GitHub: a handler for an event name without an action (`issues`) also receives every
 * `issues.<action>` event. A handler may instead choose its events itself (`Selecting`: a
 * destination's sources and type globs); the registry treats both alike.
 */
import { HandlerDefinitionError } from '@oncehook/sdk';
import { isHandler, type Handler } from '@oncehook/sdk';
import { priorityLevel } from './flow-control.js';

/** A handler that chooses its events itself instead of by its source and type. */
export interface Selecting {
  selects(source: string, kind: string, type: string): boolean;
  /** How a message names it (`the destination "crm"`). */
  readonly label: string;
}

function selecting(handler: Handler): (Handler & Selecting) | null {
  return typeof (handler as Partial<Selecting>).selects === 'function' ? (handler as Handler & Selecting) : null;
}

export class HandlerRegistry {
  readonly #byName = new Map<string, Handler>();

  constructor(handlers: readonly Handler[] = []) {
    for (const handler of handlers) this.add(handler);
  }

  /** Adds one handler; a second handler with the same name is refused (names must be unique). */
  add(handler: Handler, origin = 'the handler list'): this {
    if (!isHandler(handler)) throw new HandlerDefinitionError(`${origin}: expected a handler made by defineHandler(), got ${describe(handler)}`);
    const existing = this.#byName.get(handler.name);
    if (existing) {
      const what = (h: Handler) => selecting(h)?.label ?? `${h.source} ${h.type}`;
      throw new HandlerDefinitionError(
        `two handlers are named "${handler.name}" (${what(existing)} and ${what(handler)}, the second from ${origin}); handler and destination names must be unique`,
      );
    }
    this.#byName.set(handler.name, handler);
    return this;
  }

  /** The best (lowest) priority level among the handlers (flow-control.ts): 1 high, 2 normal, 3 low. */
  bestPriorityLevel(): number {
    if (this.#byName.size === 0) return priorityLevel({ priority: 'normal' });
    return Math.min(...[...this.#byName.values()].map(priorityLevel));
  }

  get size(): number {
    return this.#byName.size;
  }

  all(): Handler[] {
    return [...this.#byName.values()];
  }

  byName(name: string): Handler | undefined {
    return this.#byName.get(name);
  }

  /** Every handler for an event of this source, kind and type, in name order. */
  match(source: string, kind: string, type: string): Handler[] {
    return this.all()
      .filter((h) => selecting(h)?.selects(source, kind, type) ?? ((h.source === source || h.source === kind) && typeMatches(kind, h.type, type)))
      .sort((a, b) => a.name.localeCompare(b.name));
  }
}

function typeMatches(kind: string, registered: string, actual: string): boolean {
  if (registered === actual) return true;
  return kind === 'github' && !registered.includes('.') && actual.startsWith(`${registered}.`);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'function') return `a function (${value.name || 'anonymous'}); wrap it: defineHandler({ name, source, type }, fn)`;
  if (typeof value === 'object') return `an object with keys ${Object.keys(value).join(', ') || '(none)'}`;
  return typeof value;
}
