/**
 * `npm run db:schema`: migrate a scratch database and write its schema to
 * packages/core/src/schema.sql, so every schema change shows up in review as a diff of
 * one readable file. test/schema-dump.test.ts fails when the committed dump is stale.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { currentSchema, SCHEMA_FILE } from '@oncehook/harness';

await writeFile(SCHEMA_FILE, await currentSchema());
process.stdout.write(`wrote ${path.relative(process.cwd(), SCHEMA_FILE)}\n`);
