import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/**
 * Headless Chromium for the browser tests: Debian's `chromium` package (`.ci/run` installs it when
 * missing), driven by `playwright-core`, which downloads no browser of its own.
 */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * Why the browser tests cannot run here, or undefined when they can. In CI (CI=true) a missing
 * browser is an error, not a skip: the tests must run there.
 */
export function chromiumMissing(): string | undefined {
  if (existsSync(CHROMIUM_PATH)) return undefined;
  const reason = `${CHROMIUM_PATH} is absent (apt-get install chromium; .ci/run installs it)`;
  if (process.env.CI === 'true') throw new Error(`${reason}: the browser tests must run in CI`);
  return reason;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // No sandbox: the tests run as root in CI's container, where Chromium refuses to start with one.
    chromiumSandbox: false,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
    timeout: 30_000,
  });
}
