import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { BUNDLE_SETTINGS, REPO_ROOT } from '../../lib/infra/service-function.js';

/** The source files and packages a function's bundle is built from (as deployed: lib/infra/service-function.ts). */
async function bundleInputs(entry: string): Promise<string[]> {
  const result = await build({
    entryPoints: [`${REPO_ROOT}${entry}`],
    absWorkingDir: REPO_ROOT,
    bundle: true,
    write: false,
    outfile: 'out.mjs',
    format: BUNDLE_SETTINGS.format,
    platform: 'node',
    target: BUNDLE_SETTINGS.target,
    minify: BUNDLE_SETTINGS.minify,
    mainFields: [...BUNDLE_SETTINGS.mainFields],
    external: [...BUNDLE_SETTINGS.externalModules],
    metafile: true,
    logLevel: 'silent',
  });
  return Object.values(result.metafile.outputs).flatMap((output) => Object.keys(output.inputs));
}

/** What a cold start must not parse or run: each of these measured in ms of import time (bench). */
describe('function bundles', () => {
  it('the models function bundles no zod: it lists the tiers, it never validates a tier configuration', async () => {
    const inputs = await bundleInputs('functions/models/handler.ts');
    expect(inputs.some((file) => file.includes('functions/models/routes.ts'))).toBe(true);
    expect(inputs.filter((file) => /node_modules\/zod\/|functions\/core\/tiers\.ts/.test(file))).toEqual([]);
  });
});
