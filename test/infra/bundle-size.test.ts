import { readdirSync, readFileSync } from 'node:fs';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { BUNDLE_BOUNDS_KIB, bundleBuildOptions, REPO_ROOT } from '../../lib/infra/service-function.js';

/** The bytes of a function's bundle as deployed (lib/infra/service-function.ts), its source map apart. */
async function bundleBytes(entry: string): Promise<number> {
  const result = await build(bundleBuildOptions(entry));
  return result.outputFiles.reduce(
    (sum, file) => sum + (file.path.endsWith('.map') ? 0 : file.contents.length),
    0,
  );
}

/** A cold start parses and runs its whole bundle: each function's weight has a bound (BUNDLE_BOUNDS_KIB says why). */
describe('function bundle sizes', () => {
  it('bounds every deployed function', () => {
    // The stack's functions are built where a construct names their entry: the stack and its constructs.
    const sources = readdirSync(`${REPO_ROOT}lib/infra`).filter((file) => file.endsWith('.ts'));
    const entries = sources.flatMap((file) =>
      [...readFileSync(`${REPO_ROOT}lib/infra/${file}`, 'utf8').matchAll(/entry: '([^']+)'/g)].map(
        (match) => match[1],
      ),
    );
    expect(entries).toContain('functions/payments/handler.ts');
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.filter((entry) => entry && !(entry in BUNDLE_BOUNDS_KIB))).toEqual([]);
  });

  it.each(Object.entries(BUNDLE_BOUNDS_KIB))('%s is at most %i KiB', async (entry, boundKiB) => {
    const kib = (await bundleBytes(entry)) / 1024;
    expect(Math.round(kib), `${entry}: ${kib.toFixed(1)} KiB, bound ${boundKiB} KiB`).toBeLessThanOrEqual(
      boundKiB,
    );
  });
});
