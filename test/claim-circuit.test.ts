/**
 * The claim's circuit breaker alone (claim-circuit.ts): it opens after N unavailable batches
 * in a row, fails fast while open, lets one probe through when half-open, and a probe's
 * failure re-opens it at once. The batcher's use of it (503s, the probe batch of one) is
 * tested against a blackholed Postgres in backpressure.alone.test.ts.
 */
import { expect, it } from 'vitest';
import { createClaimCircuit } from '../packages/core/src/claim-circuit.js';
import { testLog } from './helpers/stack.js';

function circuitAt(failures: number, openMs: number) {
  const clock = { now: 1_000 };
  const circuit = createClaimCircuit({ failures, openMs, now: () => clock.now, log: testLog });
  return { circuit, clock };
}

it('stays closed below the threshold; a success in between resets the count', () => {
  const { circuit } = circuitAt(3, 500);
  expect(circuit.record(true)).toBe(false);
  expect(circuit.record(true)).toBe(false);
  expect(circuit.record(false)).toBe(false);
  expect(circuit.record(true)).toBe(false);
  expect(circuit.record(true)).toBe(false);
  expect(circuit.state()).toBe('closed');
});

it('opens at the threshold, half-opens after openMs, and a probe that succeeds closes it', () => {
  const { circuit, clock } = circuitAt(2, 500);
  circuit.record(true);
  expect(circuit.record(true)).toBe(true);
  expect(circuit.state()).toBe('open');
  clock.now += 499;
  expect(circuit.state()).toBe('open');
  clock.now += 1;
  expect(circuit.state()).toBe('half-open');
  expect(circuit.record(false)).toBe(false);
  expect(circuit.state()).toBe('closed');
});

it('a probe that fails re-opens the circuit at once, for openMs from then', () => {
  const { circuit, clock } = circuitAt(5, 500);
  for (let i = 0; i < 5; i++) circuit.record(true);
  clock.now += 600;
  expect(circuit.state()).toBe('half-open');
  expect(circuit.record(true)).toBe(true);
  expect(circuit.state()).toBe('open');
  clock.now += 499;
  expect(circuit.state()).toBe('open');
});
