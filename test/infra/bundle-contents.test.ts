import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { BUNDLE_SETTINGS, REPO_ROOT } from '../../lib/infra/service-function.js';

/** The source files and packages a function's bundle is built from (as deployed: lib/infra/service-function.ts). */
async function bundleInputs(entry: string): Promise<string[]> {
  const result = await bundled(entry);
  return Object.values(result.metafile.outputs).flatMap((output) => Object.keys(output.inputs));
}

function bundled(entry: string) {
  return build({
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
    alias: { ...BUNDLE_SETTINGS.alias },
    metafile: true,
    logLevel: 'silent',
  });
}

/** What a cold start must not parse or run: each of these measured in ms of import time (bench). */
describe('function bundles', () => {
  it('the models function bundles no zod: it lists the tiers, it never validates a tier configuration', async () => {
    const inputs = await bundleInputs('functions/account/handler.ts');
    expect(inputs.some((file) => file.includes('functions/account/routes.ts'))).toBe(true);
    expect(inputs.filter((file) => /node_modules\/zod\/|functions\/core\/tiers\.ts/.test(file))).toEqual([]);
  });

  it.each(['completions', 'account', 'sweeper', 'logged-usage'])(
    "the %s function bundles none of the AWS SDK: its calls are signed with the environment's credentials",
    async (name) => {
      const inputs = await bundleInputs(`functions/${name}/handler.ts`);
      expect(inputs.some((file) => file.includes('functions/adapters/dynamodb/connection.ts'))).toBe(true);
      expect(inputs.filter((file) => /node_modules\/(@aws-sdk|@smithy)\//.test(file))).toEqual([]);
    },
  );

  it.each(['completions', 'account'])(
    'the %s function takes node:http and node:https as CommonJS, never through an ESM import (which loads undici)',
    async (name) => {
      const { outputFiles } = await bundled(`functions/${name}/handler.ts`);
      const text = outputFiles?.[0]?.text ?? '';
      expect(text).toContain('getBuiltinModule("node:http")');
      expect(text.match(/from\s*"(node:)?https?"/g) ?? []).toEqual([]);
      expect(text.match(/import\s*"(node:)?https?"/g) ?? []).toEqual([]);
    },
  );

  it('the completions function builds no fetch Response, Headers or Request, whose first use loads undici', async () => {
    const { outputFiles } = await bundled('functions/completions/handler.ts');
    const text = outputFiles?.[0]?.text ?? '';
    expect(text.match(/new (Response|Headers|Request)\(|\bfetch\(/g) ?? []).toEqual([]);
  });
});
