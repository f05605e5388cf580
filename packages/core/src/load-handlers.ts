/**
 * Loads the user's handler modules (ONCEHOOK_HANDLERS): comma-separated paths, relative to the
 * working directory, each a `.ts`/`.js` file, a directory with an index, or a directory of
 * handler files (resolveModules). A module's default
 * export is a handler (defineHandler) or an array of them. No framework file is edited to add,
 * remove or change a handler.
 *
 * `.ts` modules are loaded through tsx's loader (registered on demand when this process does
 * not already run under tsx), so a handler module can be TypeScript in production too.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { HandlerDefinitionError } from '@oncehook/sdk';
import { isHandler, type Handler } from '@oncehook/sdk';
import { HandlerRegistry } from './registry.js';

const INDEX_FILES = ['index.ts', 'index.js', 'index.mjs'];
/** A handler file in a folder without an index: .ts/.js/.mts/.mjs, not a test, not a declaration. */
const HANDLER_FILE = /^(?![._]).+\.(m?ts|m?js)$/;
const NOT_A_HANDLER_FILE = /\.(test|spec)\.(m?ts|m?js)$|\.d\.m?ts$/;

/**
 * The files a module path stands for: a file; a directory's index; or, in a directory without
 * one, every handler file in it (not recursive; tests, declaration files and names starting with
 * `.` or `_` left out), in name order. An error names what was looked for.
 */
export function resolveModules(spec: string, cwd: string): string[] {
  const full = path.resolve(cwd, spec);
  if (existsSync(full) && statSync(full).isDirectory()) {
    const index = INDEX_FILES.map((f) => path.join(full, f)).find((f) => existsSync(f));
    if (index) return [index];
    const files = readdirSync(full)
      .filter((f) => HANDLER_FILE.test(f) && !NOT_A_HANDLER_FILE.test(f) && statSync(path.join(full, f)).isFile())
      .sort()
      .map((f) => path.join(full, f));
    if (files.length === 0) throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: ${spec} is a directory with no handler file (.ts or .js) and no ${INDEX_FILES.join(', ')}`);
    return files;
  }
  if (existsSync(full)) return [full];
  throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: ${spec} not found (resolved to ${full}; paths are relative to ${cwd})`);
}

let tsxRegistered = false;
/**
 * Whether this process can import TypeScript already: started with tsx, or a vitest worker
 * (whose state vitest keeps in `globalThis.__vitest_worker__`). Not the VITEST variable: a
 * process that a vitest test starts inherits it without running inside vitest. (Node caches a
 * failed import, so trying first and registering tsx afterwards would not work.)
 */
const importsTypeScript = () => tsxRegistered || '__vitest_worker__' in globalThis || process.execArgv.some((a) => a.includes('tsx'));

async function importModule(file: string): Promise<{ default?: unknown }> {
  if (/\.(c|m)?ts$/.test(file) && !importsTypeScript()) {
    const { register } = await import('tsx/esm/api');
    register();
    tsxRegistered = true;
  }
  return (await import(pathToFileURL(file).href)) as { default?: unknown };
}

/** Imports each module and returns its handlers, refusing anything that is not one. */
export async function loadHandlerModules(specs: string[], cwd = process.cwd()): Promise<{ handlers: Handler[]; modules: string[] }> {
  const registry = new HandlerRegistry();
  const modules: string[] = [];
  for (const file of specs.flatMap((spec) => resolveModules(spec, cwd))) {
    const spec = path.relative(cwd, file);
    let loaded: { default?: unknown };
    try {
      loaded = await importModule(file);
    } catch (error) {
      throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: loading ${spec} failed: ${(error as Error).message}`, { cause: error });
    }
    const exported = loaded.default;
    if (exported === undefined) throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: ${spec} has no default export; export default defineHandler(...) or an array of handlers`);
    const list = Array.isArray(exported) ? exported : [exported];
    list.forEach((item, i) => {
      if (!isHandler(item))
        throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: ${spec}: default export${Array.isArray(exported) ? `[${i}]` : ''} is not a handler made by defineHandler()`);
      registry.add(item, spec);
    });
    modules.push(path.relative(cwd, file));
  }
  return { handlers: registry.all(), modules };
}

/** ONCEHOOK_HANDLERS's comma-separated list, trimmed, empty entries dropped. */
export function handlerModuleList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
