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
