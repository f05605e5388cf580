/**
 * Memory of processes from Linux /proc: the one place that reads it, for every run that reports
 * memory (the chaos run's peak per process, the soak's samples, the bench's RSS columns, the
 * attack tests' growth under load):
 *
 * - `peakResidentMb(pid)`: VmHWM, the most resident memory the process ever had (the kernel
 *   keeps it: a sample taken now sees the peak of a second ago);
 * - `residentMb(pid)`: VmRSS, now;
 * - `proportionalMb(pids)`: the sum of their PSS (smaps_rollup), where memory shared between
 *   them (Postgres's shared buffers across its backends) counts once in all: the right total for
 *   a server made of many processes;
 * - `pidsWhoseCommandLine(test)`: the processes of a server this harness started, found by
 *   the title they show (`redis-server 127.0.0.1:PORT`, `postgres: 15/CLUSTER: ...`).
 *
 * - `sampleMax(read)`: the largest of a reading taken every 100 ms, until stopped.
 *
 * Each reads as NaN (or skips the process) when the process is gone: a run samples processes
 * that it kills. The per-process readings are synchronous: a /proc file is generated in
 * memory, and a sampler on a timer reads it between two other callbacks.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** A /proc file's text, or '' when the process is gone. */
function readOrEmpty(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readOrEmpty(`/proc/${pid}/status`);
  const kb = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1];
  return kb ? Number(kb) : Number.NaN;
}

/** Resident memory now (VmRSS), in MB (NaN when the process is gone). */
export function residentMb(pid: number | undefined): number {
  return pid === undefined ? Number.NaN : statusKb(pid, 'VmRSS') / 1024;
}

/** The most resident memory the process ever had (VmHWM), in MB (NaN when it is gone). */
export function peakResidentMb(pid: number | undefined): number {
  return pid === undefined ? Number.NaN : statusKb(pid, 'VmHWM') / 1024;
}

/**
 * Samples `read()` every `everyMs` until stopped; returns the largest reading. NaN readings (the
 * process gone at the very end) are skipped; a first reading of NaN stays NaN until a number comes.
 */
export function sampleMax(read: () => number, everyMs = 100): { stop(): number; readonly max: number } {
  let max = read();
  const timer = setInterval(() => {
    const value = read();
    if (!Number.isNaN(value) && (Number.isNaN(max) || value > max)) max = value;
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return max;
    },
    get max() {
      return max;
    },
  };
}

/** The processes whose command line (NUL bytes read as spaces) passes `test`. */
export function pidsWhoseCommandLine(test: (commandLine: string) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const commandLine = readOrEmpty(`/proc/${entry}/cmdline`);
    if (commandLine !== '' && test(commandLine.replaceAll('\0', ' ').trim())) pids.push(Number(entry));
  }
  return pids;
}

/** The sum of the processes' proportional set sizes (memory shared among them counted once), in MB. */
export function proportionalMb(pids: readonly number[]): number {
  let kb = 0;
  for (const pid of pids) {
    const rollup = readOrEmpty(`/proc/${pid}/smaps_rollup`);
    kb += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
  }
  return kb / 1024;
}

/** The largest value seen per kind of process (NaN readings are ignored). */
export class PeakMemory {
  readonly #peaks = new Map<string, number>();

  note(kind: string, mb: number): void {
    if (Number.isFinite(mb) && mb > (this.#peaks.get(kind) ?? 0)) this.#peaks.set(kind, mb);
  }

  /** Each kind's peak in MB, rounded to a tenth. */
  peaks(): Record<string, number> {
    return Object.fromEntries([...this.#peaks].map(([kind, mb]) => [kind, Math.round(mb * 10) / 10]));
  }
}
