/**
 * Loads the user's handler modules (ONCEHOOK_HANDLERS): comma-separated paths, relative to the
 * working directory, each a `.ts`/`.js` file or a directory with an index. A module's default
 * export is a handler (defineHandler) or an array of them. No framework file is edited to add,
 * remove or change a handler.
 *
 * `.ts` modules are loaded through tsx's loader (registered on demand when this process does
 * not already run under tsx), so a handler module can be TypeScript in production too.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { HandlerDefinitionError } from '@oncehook/sdk';
import { isHandler, type Handler } from '@oncehook/sdk';
import { HandlerRegistry } from './registry';

const INDEX_FILES = ['index.ts', 'index.js', 'index.mjs'];

/** The file a module path points at, or an error naming what was looked for. */
export function resolveModule(spec: string, cwd: string): string {
  const full = path.resolve(cwd, spec);
  if (existsSync(full) && statSync(full).isDirectory()) {
    const index = INDEX_FILES.map((f) => path.join(full, f)).find((f) => existsSync(f));
    if (!index) throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: ${spec} is a directory without ${INDEX_FILES.join(', ')}`);
    return index;
  }
  if (existsSync(full)) return full;
  throw new HandlerDefinitionError(`ONCEHOOK_HANDLERS: ${spec} not found (resolved to ${full}; paths are relative to ${cwd})`);
}

let tsxRegistered = false;
async function ensureTypeScript(): Promise<void> {
  // Already able to import TypeScript: started with --import tsx, or inside vitest.
  if (tsxRegistered || process.env.VITEST || process.execArgv.some((a) => a.includes('tsx'))) return;
  const { register } = await import('tsx/esm/api');
  register();
  tsxRegistered = true;
}

/** Imports each module and returns its handlers, refusing anything that is not one. */
export async function loadHandlerModules(specs: string[], cwd = process.cwd()): Promise<{ handlers: Handler[]; modules: string[] }> {
  const registry = new HandlerRegistry();
  const modules: string[] = [];
  for (const spec of specs) {
    const file = resolveModule(spec, cwd);
    if (/\.(c|m)?ts$/.test(file)) await ensureTypeScript();
    let loaded: { default?: unknown };
    try {
      loaded = (await import(pathToFileURL(file).href)) as { default?: unknown };
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
