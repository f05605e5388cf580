/**
 * Memory of processes from Linux /proc, for the runs that report it (the chaos run's peak per
 * process, the soak's samples):
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
 * Each reads as NaN (or skips the process) when the process is gone: a run samples processes
 * that it kills.
 */
import { readdir, readFile } from 'node:fs/promises';

async function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1];
  return kb ? Number(kb) : Number.NaN;
}

/** Resident memory now, in MB (NaN when the process is gone). */
export async function residentMb(pid: number | undefined): Promise<number> {
  return pid === undefined ? Number.NaN : (await statusKb(pid, 'VmRSS')) / 1024;
}

/** The most resident memory the process ever had (VmHWM), in MB (NaN when it is gone). */
export async function peakResidentMb(pid: number | undefined): Promise<number> {
  return pid === undefined ? Number.NaN : (await statusKb(pid, 'VmHWM')) / 1024;
}

/** The processes whose command line (NUL bytes read as spaces) passes `test`. */
export async function pidsWhoseCommandLine(test: (commandLine: string) => boolean): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const commandLine = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (commandLine !== '' && test(commandLine.replaceAll('\0', ' ').trim())) pids.push(Number(entry));
  }
  return pids;
}

/** The sum of the processes' proportional set sizes (memory shared among them counted once), in MB. */
export async function proportionalMb(pids: readonly number[]): Promise<number> {
  let kb = 0;
  for (const pid of pids) {
    const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
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
