/**
 * System tools some checks need (Debian packages, not npm ones): Chromium for the browser tests
 * of the admin, docker-compose to validate docker-compose.yml, Spin (and gcc, which compiles its
 * verifier) to check the protocol's model.
 *
 * On a developer's machine without them `npm test` still passes: the checks that need a missing
 * tool are skipped, and the run says which and what to install (global-setup.ts prints it).
 * On CI (`ONCEHOOK_CI=1`, set by .ci/run, which installs both) a missing tool fails the run:
 * CI never skips.
 */
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

export type SystemTool = 'chromium' | 'docker-compose' | 'spin';

export interface ToolStatus {
  available: boolean;
  /** The executable (CHROMIUM_PATH / DOCKER_COMPOSE_PATH, else found on PATH). */
  path: string;
  /** What to do when it is missing. */
  install: string;
  /** Which checks need it. */
  neededBy: string;
}

function onPath(name: string): string | null {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

export function detectTool(tool: SystemTool): ToolStatus {
  if (tool === 'chromium') {
    const path = process.env.CHROMIUM_PATH ?? onPath('chromium') ?? onPath('chromium-browser') ?? '/usr/bin/chromium';
    return {
      available: existsSync(path),
      path,
      install: 'apt-get install chromium (or set CHROMIUM_PATH)',
      neededBy: 'the admin browser tests (test/admin.test.ts, admin-csrf, admin-actions, admin-console, admin-activity; started by test/helpers/browser.ts)',
    };
  }
  if (tool === 'spin') {
    const spin = onPath('spin');
    const gcc = onPath('gcc');
    return {
      available: spin !== null && gcc !== null,
      path: spin === null ? 'spin' : gcc === null ? 'gcc' : spin,
      install: 'apt-get install spin gcc',
      neededBy: 'the protocol model check (test/protocol-model.test.ts, `npm run model`)',
    };
  }
  const path = process.env.DOCKER_COMPOSE_PATH ?? onPath('docker-compose') ?? 'docker-compose';
  return { available: existsSync(path), path, install: 'apt-get install docker-compose (or set DOCKER_COMPOSE_PATH)', neededBy: 'the compose file checks (test/compose.test.ts)' };
}

/** True when CI asked for every check to run (a missing tool is then a failure, not a skip). */
export function toolsRequired(): boolean {
  return process.env.ONCEHOOK_CI === '1' || process.env.ONCEHOOK_CI === 'true';
}
