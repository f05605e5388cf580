/**
 * The table senders' documentation follows their entries: docs/providers.md's table, the README's
 * variables, docker-compose.yml's ingest environment (`npm run docs:senders` writes all three),
 * and every built-in kind is named in docs/providers.md.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROVIDER_KINDS, SENDER_SCHEMES } from '@oncehook/providers';
import { ROOT } from '@oncehook/harness';
import { describe, expect, it } from 'vitest';
import { backfillComposeEnv, backfillVariableRows, between, providerComposeEnv, sendersTable, providerVariableRows } from '../scripts/senders-docs.js';

const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

describe('the senders described as data, documented', () => {
  it.each([
    ['docs/providers.md', 'table', sendersTable],
    ['README.md', 'variables', providerVariableRows],
    ['docker-compose.yml', 'compose', providerComposeEnv],
    ['README.md', 'backfill-variables', backfillVariableRows],
    ['docker-compose.yml', 'compose-backfill', backfillComposeEnv],
  ] as const)('%s (%s) is what `npm run docs:senders` writes', (file, name, content) => {
    const text = read(file);
    expect(between(text, name, content()), `${file} has the senders:${name} markers`).not.toBeNull();
    expect(between(text, name, content()) === text, `${file} is out of date: run npm run docs:senders`).toBe(true);
  });

  it('docs/providers.md names every built-in kind, and the table has one row per table sender', () => {
    const doc = read('docs/providers.md');
    for (const kind of PROVIDER_KINDS) expect(doc, kind).toContain(`\`${kind}\``);
    expect(sendersTable().split('\n')).toHaveLength(Object.keys(SENDER_SCHEMES).length + 2);
  });
});
