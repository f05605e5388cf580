/**
 * The mutant catalog stays true to the code: every rule's search text occurs exactly once in
 * its file, and every test file it names exists. (Running the mutants takes minutes:
 * `npm run mutants`; this check takes milliseconds, so a rule made stale by a refactor fails
 * the default suite the day it happens.)
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '@oncehook/harness';
import { expect, it } from 'vitest';
import { MUTANTS } from '../scripts/mutants/catalog';

it.each(MUTANTS.map((m) => [m.id, m] as const))('%s matches the code exactly once, and its tests exist', async (_id, mutant) => {
  const text = await readFile(path.join(ROOT, mutant.file), 'utf8');
  expect(text.split(mutant.search).length - 1, `${mutant.file}: search text of ${mutant.id}`).toBe(1);
  expect(mutant.replace).not.toBe(mutant.search);
  for (const test of mutant.tests) expect(existsSync(path.join(ROOT, test)), test).toBe(true);
});

it('mutant ids are unique', () => {
  expect(new Set(MUTANTS.map((m) => m.id)).size).toBe(MUTANTS.length);
});
