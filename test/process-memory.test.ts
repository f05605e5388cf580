/**
 * The harness's one reader of process memory (packages/harness/src/process-memory.ts), which the
 * chaos run, the soak, the bench and the attack tests report from: a live process reads as a
 * number, a gone one as NaN (never a throw, never 0), and a sampler skips NaN readings.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { peakResidentMb, pidsWhoseCommandLine, proportionalMb, residentMb, sampleMax } from '@oncehook/harness';
import { describe, expect, it } from 'vitest';

describe('process memory from /proc', () => {
  it('reads this process: resident now, its peak at least that, its PSS, found by command line', () => {
    const now = residentMb(process.pid);
    expect(now).toBeGreaterThan(10);
    expect(peakResidentMb(process.pid)).toBeGreaterThanOrEqual(now);
    expect(proportionalMb([process.pid])).toBeGreaterThan(0);
    expect(pidsWhoseCommandLine((line) => line.includes(process.argv[1]!))).toContain(process.pid);
  });

  it('reads a gone process as NaN (and proportionalMb skips it)', async () => {
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(child, 'exit');
    const pid = child.pid!;
    expect(residentMb(pid)).toBeNaN();
    expect(peakResidentMb(pid)).toBeNaN();
    expect(residentMb(undefined)).toBeNaN();
    expect(proportionalMb([pid])).toBe(0);
  });

  it('sampleMax keeps the largest reading and skips NaN (a process gone at the end)', async () => {
    const readings = [Number.NaN, 5, 9, Number.NaN, 7];
    let i = 0;
    const sampler = sampleMax(() => readings[Math.min(i++, readings.length - 1)]!, 5);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(sampler.stop()).toBe(9);
  });
});
