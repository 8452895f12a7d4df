/**
 * What each function bundle holds, by package: esbuild's metafile of each entry built with
 * the stack's settings (lib/infra/service-function.ts BUNDLE_SETTINGS), the bytes each package (or
 * each folder of this repository's own code) adds to the minified output, heaviest first.
 */
import { build } from 'esbuild';
import { BUNDLE_BOUNDS_KIB, bundleBuildOptions } from '../lib/infra/service-function.js';

interface Weights {
  entry: string;
  kib: number;
  /** Package (or repository folder) and its KiB in the output, heaviest first. */
  parts: [string, number][];
}

export async function bundleWeights(): Promise<Weights[]> {
  const weights: Weights[] = [];
  for (const entry of Object.keys(BUNDLE_BOUNDS_KIB)) {
    const result = await build({ ...bundleBuildOptions(entry), metafile: true as const });
    const byPart = new Map<string, number>();
    for (const output of Object.values(result.metafile.outputs))
      for (const [file, input] of Object.entries(output.inputs)) {
        const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1];
        const part = pkg ?? file.replace(/\/[^/]+$/, '/');
        byPart.set(part, (byPart.get(part) ?? 0) + input.bytesInOutput / 1024);
      }
    const bytes = result.outputFiles.reduce((sum, file) => sum + file.contents.length, 0);
    weights.push({ entry, kib: bytes / 1024, parts: [...byPart].sort((a, b) => b[1] - a[1]) });
  }
  return weights;
}

export function sayBundleWeights(say: (line?: string) => void, weights: Weights[], top = 8) {
  say('');
  say(
    `What each bundle holds (esbuild metafile, minified output, KiB): its ${top} heaviest packages or folders of this repository; the bound is BUNDLE_BOUNDS_KIB (test/infra/bundle-size.test.ts).`,
  );
  say('');
  say('| entry | KiB | bound | heaviest parts |');
  say('|---|---|---|---|');
  for (const { entry, kib, parts } of weights)
    say(
      `| ${entry} | ${kib.toFixed(0)} | ${BUNDLE_BOUNDS_KIB[entry] ?? '-'} | ${parts
        .slice(0, top)
        .map(([part, size]) => `${part} ${size.toFixed(1)}`)
        .join(', ')} |`,
    );
}
