/**
 * The README renders: every line that looks like a table row is inside a table a Markdown parser
 * (marked, GitHub-flavoured) recognises, with as many cells as its header; and every variable a
 * process reads is documented in one of its tables.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '@oncehook/harness';
import { CONFIG_VARIABLES } from 'oncehook';
import { lexer, type Tokens } from 'marked';
import { expect, it } from 'vitest';

const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const tables = lexer(README, { gfm: true }).filter((t): t is Tokens.Table => t.type === 'table');

it('every table row of the README is in a table that renders, with its header’s number of cells', () => {
  const rowsInTables = tables.reduce((n, t) => n + 2 + t.rows.length, 0); // header + separator + rows
  const outsideCode = README.replace(/```[\s\S]*?```/g, '');
  const tableLikeLines = outsideCode.split('\n').filter((line) => /^\|.*\|\s*$/.test(line));
  expect(tableLikeLines.length).toBe(rowsInTables);
  for (const table of tables) {
    for (const row of table.rows) expect(row.length, `${table.header.map((h) => h.text).join(' | ')}: ${row.map((c) => c.text).join(' | ')}`).toBe(table.header.length);
  }
});

it('documents every variable a process reads, in a table', () => {
  const documented = new Set(tables.flatMap((t) => t.rows.flatMap((row) => [...(row[0]?.text ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]))));
  const variables = [...CONFIG_VARIABLES.common, ...CONFIG_VARIABLES.ingest, ...CONFIG_VARIABLES.worker];
  expect(variables.filter((name) => !documented.has(name))).toEqual([]);
});
