/** The committed schema dump matches what the migrations produce (`npm run db:schema` refreshes it). */
import { readFile } from 'node:fs/promises';
import { expect, it } from 'vitest';
import { currentSchema, SCHEMA_FILE } from '@oncehook/harness';

it('packages/core/src/schema.sql is current', async () => {
  expect(await readFile(SCHEMA_FILE, 'utf8'), 'schema.sql is stale: run npm run db:schema').toBe(await currentSchema());
});
