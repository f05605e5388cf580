/**
 * Where a mutant applies. A rule names its guard by a marker in the code (`// mutant: <id>`,
 * several ids comma-separated, on a line of its own above the guarded statement), so a refactor
 * that moves the guard to another file or re-wraps its lines keeps its mutant; its search text
 * is then looked for in the marker's window only, with any run of whitespace matching any other.
 * A marker found nowhere, twice, or a search text not found exactly once in its window is an
 * error that names the rule: `npm run mutants` reports it as a stale rule and
 * test/mutants-catalog.test.ts fails on it.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/** How far below its marker a rule's search text may start: a long SQL statement fits. */
export const MARKER_WINDOW_LINES = 150;

/** Where markers are looked for: the code a mutant can change. */
export const MARKED_SOURCES = ['packages', 'apps'];

export interface Edit {
  file?: string;
  search: string;
  replace: string;
}

export interface Rule {
  id: string;
  /** The guard's file, when it carries no marker (a shipped migration is never edited). */
  file?: string;
  /** The id of the `// mutant: <id>` comment above the guard; default: none (then `file`). */
  marker?: string;
  search: string;
  replace: string;
  also?: Edit[];
}

/** The markers of a source file: each id with the line it is on (0-based). */
export function markersIn(text: string): { id: string; line: number }[] {
  const found: { id: string; line: number }[] = [];
  text.split('\n').forEach((line, i) => {
    const m = /^\s*(?:\/\/|--)\s*mutants?: ([a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*)\s*$/.exec(line);
    if (m) for (const id of m[1]!.split(',')) found.push({ id: id.trim(), line: i });
  });
  return found;
}

/**
 * A pattern for `search` in which a run of whitespace matches any run of whitespace; leading
 * indentation must begin a line and a trailing line break end one (so a rule written for a
 * whole line never matches the tail of a longer one: `claim = ...` is not `const claim = ...`).
 */
function searchPattern(search: string): RegExp {
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const lead = /^\s*/.exec(search)![0];
  const trail = /\s*$/.exec(search.slice(lead.length))![0];
  const body = search.slice(lead.length, search.length - trail.length);
  const inner = body.split(/\s+/).map(literal).join('\\s+');
  // Indentation at its start begins a line; a line break at its end ends one.
  const start = lead === '' ? '' : lead.includes('\n') ? '\\s*\\n[ \\t]*' : '(?<![^\\n])[ \\t]*';
  const end = trail === '' ? '' : trail.includes('\n') ? '[ \\t]*\\n' : '[ \\t]*';
  return new RegExp(`${start}${inner}${end}`, 'g');
}

/** Replaces the one occurrence of `search` in text[from, to); an error message when not exactly one. */
export function replaceOnce(text: string, search: string, replace: string, from = 0, to = text.length): string | { problem: string } {
  const window = text.slice(from, to);
  const matches = [...window.matchAll(searchPattern(search))];
  if (matches.length !== 1) return { problem: `search text found ${matches.length} times where it must be found once` };
  const at = from + matches[0]!.index;
  return text.slice(0, at) + replace + text.slice(at + matches[0]![0].length);
}

/** Every source file that may carry a marker, relative to root. */
async function sourceFiles(root: string): Promise<string[]> {
  const files: string[] = [];
  for (const top of MARKED_SOURCES) {
    const entries = (await readdir(path.join(root, top), { recursive: true })) as string[];
    for (const entry of entries) {
      if (entry.split(path.sep).includes('node_modules') || entry.split(path.sep).includes('dist')) continue;
      if (/\.(ts|mts|sql)$/.test(entry) && !entry.endsWith('.d.ts')) files.push(path.join(top, entry));
    }
  }
  return files;
}

/** Every marker of the sources under root: id -> where (file, line); an id seen twice is listed under `twice`. */
export async function findMarkers(root: string): Promise<{ at: Map<string, { file: string; line: number }>; twice: string[] }> {
  const at = new Map<string, { file: string; line: number }>();
  const twice: string[] = [];
  for (const file of await sourceFiles(root)) {
    const text = await readFile(path.join(root, file), 'utf8');
    if (!text.includes('mutant')) continue;
    for (const marker of markersIn(text)) {
      if (at.has(marker.id)) twice.push(`${marker.id} (${at.get(marker.id)!.file} and ${file})`);
      else at.set(marker.id, { file, line: marker.line });
    }
  }
  return { at, twice };
}

/**
 * The files a rule changes, with their mutated texts; or what is wrong with the rule. `markers`
 * comes from findMarkers (read once for a whole catalog).
 */
export async function locate(root: string, rule: Rule, markers: Map<string, { file: string; line: number }>): Promise<{ files: Map<string, string> } | { problem: string }> {
  let file = rule.file;
  let from = 0;
  let lines: number | null = null;
  if (rule.marker) {
    const where = markers.get(rule.marker);
    if (!where) return { problem: `${rule.id}: no "// mutant: ${rule.marker}" marker in ${MARKED_SOURCES.join(', ')}: put it back above the guarded line, or change the catalog` };
    file = where.file;
    from = where.line;
    lines = MARKER_WINDOW_LINES;
  }
  if (!file) return { problem: `${rule.id}: names neither a marker nor a file` };
  const texts = new Map<string, string>();
  const edits = [{ file, search: rule.search, replace: rule.replace }, ...(rule.also ?? []).map((e) => ({ ...e, file: e.file ?? file }))];
  for (const [i, edit] of edits.entries()) {
    const text = texts.get(edit.file!) ?? (await readFile(path.join(root, edit.file!), 'utf8').catch(() => null));
    if (text === null) return { problem: `${rule.id}: ${edit.file} does not exist` };
    // The marker's window holds the first edit; the others (`also`) are looked for in their whole file.
    let start = 0;
    let end = text.length;
    if (i === 0 && lines !== null) {
      const offsets = lineOffsets(text);
      start = offsets[from] ?? 0;
      end = offsets[from + lines + 1] ?? text.length;
    }
    const changed = replaceOnce(text, edit.search, edit.replace, start, end);
    if (typeof changed !== 'string') return { problem: `${rule.id}: ${edit.file}${i === 0 && rule.marker ? ` (below its marker)` : ''}: edit ${i}: ${changed.problem}` };
    texts.set(edit.file!, changed);
  }
  return { files: texts };
}

function lineOffsets(text: string): number[] {
  const offsets = [0];
  for (let i = 0; i < text.length; i += 1) if (text[i] === '\n') offsets.push(i + 1);
  return offsets;
}
