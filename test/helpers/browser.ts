/**
 * The real Chromium of the admin's browser tests (test/helpers/tools.ts finds it; CI installs
 * it), started the same way by every one of them: no sandbox (tests run as root), nothing that
 * reaches off the machine on its own (background networking, component updates, sync).
 */
import { chromium, type Browser } from 'playwright-core';
import { inject } from 'vitest';

export const CHROMIUM = inject('tools').chromium;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM.path,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
