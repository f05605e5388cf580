/**
 * `npm run bench -- --profile DIR`: the end-to-end processes run with node's --cpu-prof; this
 * reads each .cpuprofile and prints where the process spent its CPU: the top frames by self
 * time, with the share of busy (non-idle) time. Open the files in Chrome DevTools for the rest.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The top `count` frames by self time, as lines `share% function file:line`. */
export function topFrames(file: string, count = 12): string[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)') return;
    const where = frame.url.replace(/.*node_modules\//, '').replace(/^file:\/\/.*?\/(apps|packages|examples)\//, '$1/');
    const key = `${frame.functionName || '(anonymous)'} ${where ? `${where}:${frame.lineNumber + 1}` : ''}`.trim();
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(key, (self.get(key) ?? 0) + dt);
    busy += dt;
  });
  return [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([key, us]) => `${((100 * us) / Math.max(1, busy)).toFixed(1).padStart(5)}%  ${key}`);
}

/** Every profile in `dir` (the main thread's: the largest file per process). */
export function summarizeProfiles(dir: string, names: Record<number, string>): string[] {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  const byPid = new Map<number, string>();
  for (const f of files) {
    const pid = Number(f.split('.')[3]);
    const current = byPid.get(pid);
    const size = readFileSync(path.join(dir, f)).length;
    if (!current || readFileSync(path.join(dir, current)).length < size) byPid.set(pid, f);
  }
  const lines: string[] = [];
  for (const [pid, f] of byPid) {
    lines.push('', `${names[pid] ?? `pid ${pid}`} (${path.join(dir, f)}), top frames by self time, share of busy time:`);
    lines.push(...topFrames(path.join(dir, f)).map((l) => `  ${l}`));
  }
  return lines;
}
