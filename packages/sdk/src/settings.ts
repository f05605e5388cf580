/**
 * Settings for a handler module, from its own environment variables, validated once when the
 * worker loads the module. A bad or missing variable stops the worker at start with a message
 * naming it, never mid-event.
 *
 *   const settings = readSettings({
 *     REFUNDS_EMAIL_API_URL: z.string().url(),
 *     REFUNDS_FROM: z.string().email().default('billing@example.com'),
 *   });
 */
import { ConfigError } from './errors.js';
import { z } from 'zod';

type Env = Record<string, string | undefined>;

export function readSettings<Shape extends z.ZodRawShape>(shape: Shape, env: Env = process.env): z.infer<z.ZodObject<Shape>> {
  // Empty means unset, as for Oncehook's own settings (docker-compose passes `FOO=` for unset variables).
  const cleaned = Object.fromEntries(Object.keys(shape).flatMap((name) => (env[name] === undefined || env[name] === '' ? [] : [[name, env[name]]])));
  const result = z.object(shape).safeParse(cleaned);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  throw new ConfigError(`Invalid handler settings; fix these environment variables:\n${lines.join('\n')}`);
}
