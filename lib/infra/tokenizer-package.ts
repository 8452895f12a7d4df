/**
 * The tokenizer as it ships beside each function bundle (node_modules/gpt-tokenizer), loaded only when
 * an upstream reports no usage (functions/core/tokens.ts). gpt-tokenizer's o200k ranks come as one
 * JavaScript array literal of 200,000 strings; parsed as code they took 65 MiB of RSS and 127 ms to
 * import on Node 22 (npm run bench, import table). Here the package is bundled with that module
 * replaced by a JSON file of the same ranks read on first use, which V8 parses as data: 20 MiB less RSS
 * once loaded (78 against 97 MiB at 160 MB's heap limits) and 99-106 against 128 ms to load, the counts
 * unchanged (test/infra/tokenizer-package.test.ts).
 *
 * Used by the stack's bundling (ServiceFunction's afterBundling step runs this file) and by the local
 * aws-lambda-ric bundles (lib/local/aws-lambda-ric.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

export const TOKENIZER = 'gpt-tokenizer';
const RANKS_FILE = 'o200k_base.json';
/** The module of the package that holds the ranks as code. */
const RANKS_MODULE = /gpt-tokenizer[\\/]esm[\\/]bpeRanks[\\/]o200k_base\.js$/;

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The ranks module becomes a read of RANKS_FILE beside the bundle. */
const ranksFromJson: Plugin = {
  name: 'o200k-ranks-from-json',
  setup(plugin) {
    plugin.onLoad({ filter: RANKS_MODULE }, () => ({
      contents: [
        "import { readFileSync } from 'node:fs';",
        `export default JSON.parse(readFileSync(new URL('./${RANKS_FILE}', import.meta.url), 'utf8'));`,
      ].join('\n'),
      loader: 'js',
    }));
  },
};

/** Writes the tokenizer package into `outDir/node_modules/gpt-tokenizer`: index.mjs, the ranks, package.json. */
export async function buildTokenizerPackage(outDir: string): Promise<string> {
  const dir = join(outDir, 'node_modules', TOKENIZER);
  mkdirSync(dir, { recursive: true });
  const result = await build({
    entryPoints: [join(REPO_ROOT, 'node_modules', TOKENIZER, 'esm/main.js')],
    outfile: join(dir, 'index.mjs'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    minify: true,
    plugins: [ranksFromJson],
    metafile: true,
    logLevel: 'warning',
  });
  // The plugin must have replaced the ranks: a package upgrade that moves them fails the build here.
  const inputs = Object.keys(result.metafile.inputs);
  if (!inputs.some((input) => RANKS_MODULE.test(input)))
    throw new Error(`${TOKENIZER}: no o200k ranks module among the bundle's inputs; see ${RANKS_MODULE}`);
  const ranks = (await import(`${TOKENIZER}/bpeRanks/o200k_base`)) as { default: unknown[] };
  writeFileSync(join(dir, RANKS_FILE), JSON.stringify(ranks.default));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: TOKENIZER, type: 'module', exports: './index.mjs' }),
  );
  return dir;
}

// As a script (the stack's afterBundling step): `tsx lib/infra/tokenizer-package.ts <outDir>`.
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const outDir = process.argv[2];
  if (!outDir) throw new Error('usage: tsx lib/infra/tokenizer-package.ts <outDir>');
  await buildTokenizerPackage(outDir);
}
