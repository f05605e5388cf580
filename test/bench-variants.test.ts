/**
 * `npm run bench -- --variants ...` (scripts/bench/e2e.ts, VARIANTS): each variant row is this
 * checkout with a few environment variables changed. What a row measures is only what those
 * variables do, so each variant's environments are read here by the same config loaders the
 * processes use: a variable renamed or removed in the config makes this fail instead of a
 * variant row that silently measures the plain top-up.
 */
import { loadDestinations } from '@oncehook/core';
import { loadIngestConfig, loadWorkerConfig } from 'oncehook';
import { describe, expect, it } from 'vitest';
import { VARIANTS, variantEnv, type Variant } from '../scripts/bench/e2e.js';

const RECEIVER = 'http://127.0.0.1:9/receiver';

describe('bench variants', () => {
  it('the delivery log off reaches the ingest as a setting, and nothing else changes', () => {
    const { workerEnv, ingestEnv } = variantEnv('nolog', RECEIVER);
    expect(workerEnv).toEqual({});
    expect(loadIngestConfig({}).DELIVERY_LOG).toBe(true);
    expect(loadIngestConfig({ ...ingestEnv }).DELIVERY_LOG).toBe(false);
  });

  it('the destination variant forwards to the bench receiver, with a secret the worker accepts', () => {
    const { workerEnv, ingestEnv } = variantEnv('destination', RECEIVER);
    expect(ingestEnv).toBeUndefined();
    const [destination, ...more] = loadDestinations(workerEnv);
    expect(more).toEqual([]);
    expect(destination).toMatchObject({ name: 'bench-receiver', url: new URL(RECEIVER) });
  });

  it("every variant's environments are settings the ingest and the worker accept", () => {
    for (const variant of Object.keys(VARIANTS) as Variant[]) {
      const { workerEnv, ingestEnv } = variantEnv(variant, RECEIVER);
      expect(() => loadWorkerConfig(workerEnv), variant).not.toThrow();
      expect(() => loadDestinations(workerEnv), variant).not.toThrow();
      expect(() => loadIngestConfig(ingestEnv ?? {}), variant).not.toThrow();
    }
  });
});
