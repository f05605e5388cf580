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
