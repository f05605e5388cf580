/**
 * The model of the run protocol (model/protocol.pml), checked by Spin at the small bound: every
 * interleaving of two deliveries, two workers, the reconciler, a lease clock and the faults
 * keeps the four invariants; and each mutant of the model (the fence removed, the steps read in
 * the lease statement's snapshot, ...) yields a counterexample breaking the invariant it
 * should, so the invariants are not vacuous. `npm run model -- --bound deep` looks further.
 */
import { checkModel, MODEL_MUTANTS, type ModelMutant } from '@oncehook/harness';
import { describe, expect, inject, it } from 'vitest';

// Skipped only on a machine without Spin; CI installs it and fails a run without it (tools.ts).
describe.skipIf(!inject('tools').spin.available)('the protocol model (Spin)', () => {
  it('holds every invariant in every interleaving at the small bound', async () => {
    const result = await checkModel({ bound: 'small' });
    expect(result.violated, result.trail.join('\n')).toBeNull();
    expect(result.errors).toBe(0);
    expect(result.complete).toBe(true);
    // The search went somewhere: millions of states, through takeovers and crashes.
    expect(result.statesStored).toBeGreaterThan(1_000_000);
  }, 120_000);

  it.each(Object.keys(MODEL_MUTANTS) as ModelMutant[])(
    'mutant %s yields a counterexample to the invariant it breaks',
    async (mutant) => {
      const result = await checkModel({ bound: 'small', mutant });
      expect(result.errors).toBe(1);
      expect(result.violated).toContain(MODEL_MUTANTS[mutant].breaks);
      // The trail is the model's own account, statement by statement, ending at the assertion.
      expect(result.trail[0]).toBe('ingest CLAIM_EVENT: inserted');
      expect(result.trail.at(-1)).toMatch(/^spin: text of failed assertion/);
    },
    120_000,
  );
});
