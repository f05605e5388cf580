/**
 * The mutant catalog stays true to the code: every rule finds its marker once and its search
 * text exactly once below it (scripts/mutants/locate.ts), every marker in the code names a
 * rule, and every test file a rule names exists. (Running the mutants takes minutes:
 * `npm run mutants`; this check takes milliseconds, so a rule made stale by a refactor fails
 * the default suite the day it happens.)
 */
import { existsSync } from 'node:fs';
import { ROOT } from '@oncehook/harness';
import { beforeAll, expect, it } from 'vitest';
import { MUTANTS } from '../scripts/mutants/catalog.js';
import { findMarkers, locate, replaceOnce } from '../scripts/mutants/locate.js';

let markers: Awaited<ReturnType<typeof findMarkers>>;
beforeAll(async () => {
  markers = await findMarkers(ROOT);
});

it.each(MUTANTS.map((m) => [m.id, m] as const))('%s finds its guard exactly once, changes it, and its tests exist', async (_id, mutant) => {
  const located = await locate(ROOT, mutant, markers.at);
  expect('problem' in located ? located.problem : null).toBeNull();
  for (const edit of [mutant, ...(mutant.also ?? [])]) expect(edit.replace).not.toBe(edit.search);
  for (const test of mutant.tests) expect(existsSync(`${ROOT}/${test}`), test).toBe(true);
});

it('mutant ids are unique; every marker in the code names a rule, once; only a shipped migration is named by its file', () => {
  expect(new Set(MUTANTS.map((m) => m.id)).size).toBe(MUTANTS.length);
  expect(markers.twice).toEqual([]);
  const named = new Set(MUTANTS.flatMap((m) => (m.marker ? [m.marker] : [])));
  expect([...markers.at.keys()].filter((id) => !named.has(id))).toEqual([]);
  expect(MUTANTS.filter((m) => !m.marker && !/\/migrations\/\d{4}_[^/]+\.sql$/.test(m.file ?? '')).map((m) => m.id)).toEqual([]);
});

it('the locator: a marker that moved files is followed; re-wrapped lines still match; a missing marker or a second match is named', async () => {
  expect(replaceOnce('a\n  if (x &&\n      y) go();\n', '  if (x && y) go();', '  stop();')).toBe('a\n  stop();\n');
  expect(replaceOnce('f(x); f(x);', 'f(x);', 'g();')).toEqual({ problem: 'search text found 2 times where it must be found once' });
  expect(replaceOnce('f(x);', 'f(y);', 'g();')).toEqual({ problem: 'search text found 0 times where it must be found once' });
  const rule = MUTANTS.find((m) => m.marker)!;
  const gone = await locate(ROOT, rule, new Map());
  expect(gone).toEqual({ problem: expect.stringContaining(`no "// mutant: ${rule.marker}" marker`) });
});
