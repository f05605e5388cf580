/** Code blocks of the docs, so tests run exactly what the docs show. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '@oncehook/harness';

/** The ```ts block of `doc` whose first line is `// <file>`. */
export async function docCodeBlock(doc: string, file: string): Promise<string> {
  const text = await readFile(path.join(ROOT, doc), 'utf8');
  for (const match of text.matchAll(/```ts\n([\s\S]*?)```/g)) {
    const code = match[1]!;
    if (code.startsWith(`// ${file}\n`)) return code;
  }
  throw new Error(`${doc} has no \`\`\`ts block starting with "// ${file}"`);
}

/** The ```<language> block of `doc` whose first line is the comment `<marker> <file>` (`--` for SQL, `#` for sh). */
export async function docBlock(doc: string, language: string, firstLine: string): Promise<string> {
  const text = await readFile(path.join(ROOT, doc), 'utf8');
  for (const match of text.matchAll(new RegExp(`\`\`\`${language}\n([\\s\\S]*?)\`\`\``, 'g'))) {
    const code = match[1]!;
    if (code.startsWith(`${firstLine}\n`)) return code;
  }
  throw new Error(`${doc} has no \`\`\`${language} block starting with "${firstLine}"`);
}

/** The ```<language> block of `doc` whose first line starts with `prefix` (a command followed by its comment). */
export async function docBlockStarting(doc: string, language: string, prefix: string): Promise<string> {
  const text = await readFile(path.join(ROOT, doc), 'utf8');
  for (const match of text.matchAll(new RegExp(`\`\`\`${language}\n([\\s\\S]*?)\`\`\``, 'g'))) {
    const code = match[1]!;
    if (code.startsWith(prefix)) return code;
  }
  throw new Error(`${doc} has no \`\`\`${language} block whose first line starts with "${prefix}"`);
}

/** The first line of a ```sh block of `doc` that starts with `prefix` (a command the doc tells the reader to run). */
export async function docCommand(doc: string, prefix: string | RegExp): Promise<string> {
  const text = await readFile(path.join(ROOT, doc), 'utf8');
  for (const match of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of match[1]!.split('\n')) {
      const command = line.replace(/\s+#.*$/, '').trim();
      if (typeof prefix === 'string' ? command.startsWith(prefix) : prefix.test(command)) return command;
    }
  }
  throw new Error(`${doc} has no sh command matching ${String(prefix)}`);
}

/**
 * What a documented `npm` line runs, resolved through package.json's scripts the way npm does:
 * `VAR=value ... npm start` or `npm run <script> [-- args]` -> the environment it sets and the
 * node arguments of the script with the extra args appended. Only scripts that are a single
 * `node ...` command are supported (ours all are); anything else is an error naming the line.
 */
export async function npmCommand(line: string): Promise<{ env: Record<string, string>; nodeArgs: string[] }> {
  const words = line.trim().split(/\s+/);
  const env: Record<string, string> = {};
  while (words[0] && /^[A-Z_][A-Z0-9_]*=/.test(words[0])) {
    const [name, ...value] = words.shift()!.split('=');
    env[name!] = value.join('=');
  }
  let script: string;
  let extra: string[] = [];
  if (words[0] === 'npm' && words[1] === 'start') {
    script = 'start';
    extra = words.slice(2);
  } else if (words[0] === 'npm' && words[1] === 'run' && words[2]) {
    script = words[2];
    extra = words[3] === '--' ? words.slice(4) : words.slice(3);
  } else {
    throw new Error(`not an npm start/run line: ${line}`);
  }
  if (extra.some((w) => /['"$`|&;<>]/.test(w))) throw new Error(`npmCommand: quoting and shell syntax are not supported: ${line}`);
  const scripts = (JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const command = scripts[script]?.split(/\s+/) ?? [];
  if (command[0] !== 'node') throw new Error(`package.json script "${script}" is not a single node command: ${scripts[script]}`);
  // What npm itself sets for a script (the command's printed hints read them).
  return {
    env: { npm_lifecycle_event: script, npm_package_name: 'oncehook', npm_package_json: path.join(ROOT, 'package.json'), ...env },
    nodeArgs: [...command.slice(1), ...extra],
  };
}
