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
import { MUTANTS } from '../scripts/mutants/catalog.js';

it.each(MUTANTS.map((m) => [m.id, m] as const))('%s matches the code exactly once, and its tests exist', async (_id, mutant) => {
  const texts = new Map<string, string>();
  for (const [i, edit] of [{ file: mutant.file, search: mutant.search, replace: mutant.replace }, ...(mutant.also ?? [])].entries()) {
    const file = edit.file ?? mutant.file;
    const text = texts.get(file) ?? (await readFile(path.join(ROOT, file), 'utf8'));
    expect(text.split(edit.search).length - 1, `${file}: search text ${i} of ${mutant.id}`).toBe(1);
    expect(edit.replace).not.toBe(edit.search);
    texts.set(
      file,
      text.replace(edit.search, () => edit.replace),
    );
  }
  for (const test of mutant.tests) expect(existsSync(path.join(ROOT, test)), test).toBe(true);
});

it('mutant ids are unique', () => {
  expect(new Set(MUTANTS.map((m) => m.id)).size).toBe(MUTANTS.length);
});
