/**
 * Step results are recorded as jsonb and handed back on a resumed attempt, so they must be
 * plain JSON. `toRecordedJson` checks a value and returns exactly what will be stored; a value
 * that JSON would silently change (a Date becomes a string, a Map becomes {}, undefined in an
 * array becomes null, NaN becomes null, a class instance loses its prototype) is refused with
 * a message naming the path, never stored changed.
 */
import { StepUsageError } from './errors.js';

/** A JSON value, as stored and as handed back. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

function kindOf(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : 'Infinity';
  if (typeof value === 'bigint') return 'a bigint';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  const name = (value as object).constructor?.name;
  return name ? `a ${name}` : 'an object with a custom prototype';
}

/** Returns the first path at which `value` is not plain JSON, with what was found there. */
export function findNonJson(value: unknown, path = 'result', seen = new Set<object>()): string | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : `${path} is ${kindOf(value)}`;
  if (typeof value !== 'object') return `${path} is ${kindOf(value)}`;
  if (seen.has(value)) return `${path} is a circular reference`;
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i += 1) {
        if (!(i in value)) return `${path}[${i}] is an empty slot (sparse array)`;
        const problem = findNonJson(value[i], `${path}[${i}]`, seen);
        if (problem) return problem;
      }
      return null;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return `${path} is ${kindOf(value)}`;
    for (const [key, item] of Object.entries(value)) {
      // An undefined property is dropped by JSON: absent on resume, undefined either way.
      if (item === undefined) continue;
      const problem = findNonJson(item, `${path}.${key}`, seen);
      if (problem) return problem;
    }
    if (Object.getOwnPropertySymbols(value).length > 0) return `${path} has symbol keys`;
    return null;
  } finally {
    seen.delete(value);
  }
}

/**
 * The value a step records and returns, on its first run and on every resumed attempt alike:
 * `undefined` (a step with no result) becomes null, undefined properties are dropped. Throws
 * StepUsageError for anything JSON would change.
 */
export function toRecordedJson(value: unknown, step: string): Json {
  if (value === undefined) return null;
  // mutant: step-result-not-json
  const problem = findNonJson(value);
  if (problem) {
    throw new StepUsageError(
      `step "${step}" returned a value that is not plain JSON: ${problem}. Step results are recorded as JSON and handed back on a resumed attempt, so return plain data (strings, numbers, booleans, null, arrays, plain objects): for example a date as date.toISOString(), a response as the fields you need.`,
    );
  }
  return JSON.parse(JSON.stringify(value)) as Json;
}
