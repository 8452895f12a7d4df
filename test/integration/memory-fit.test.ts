/**
 * The completions function holds the largest requests within its configured memory size: built as the
 * stack builds it, run by AWS's runtime client (aws-lambda-ric on Node 22) with the V8 heap limits
 * Lambda's Node.js runtime gives that size, it serves four 5.8 MiB requests (the most a Function URL
 * takes; text beyond Latin-1, so every copy is two bytes a character) whose upstream reports no usage,
 * so the tokenizer loads and counts them. Lambda stops an instance whose memory reaches the size: that
 * request would go unanswered, and a relayed stream unbilled. Each is answered and billed here, and the
 * instance's peak RSS stays under the size with room to spare.
 *
 * Needs the runtime (scripts/install-lambda-runtime.sh): skipped with a message without it, required
 * in CI (CI=true), as the conformance suite is.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { singleUpstreamConfig } from '../../functions/core/tiers.js';
import { startSimulator } from '../../functions/simulator/server.js';
import { FUNCTION_SETTINGS } from '../../lib/infra/function-settings.js';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import { bundleFunctions, ricLauncher, runtimeInstalled } from '../../lib/local/aws-lambda-ric.js';
import { ledgerOf } from '../support/settled.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

const RIC = runtimeInstalled();
const MiB = 1024 * 1024;
/** What must stay free below the memory size at the peak. */
const HEADROOM_MIB = 8;

let target: Target | undefined;
let bundleDir = '';
let simulator: Awaited<ReturnType<typeof startSimulator>> | undefined;

beforeAll(async () => {
  if (!RIC) {
    if (process.env.CI === 'true') throw new Error('aws-lambda-ric is not installed; .ci/run installs it');
    return;
  }
  const bundles = await bundleFunctions('.cache/memory-bundles');
  bundleDir = join(REPO_ROOT, '.cache/memory-bundles/completions');
  // Tiers whose context length takes such a request (models with millions of tokens of context
  // exist); a 128,000-token tier refuses it before counting more than its context length.
  simulator = await startSimulator({ port: 0 });
  const tiers = Object.fromEntries(
    Object.entries(singleUpstreamConfig(simulator.url)).map(([id, targets]) => [
      id,
      { targets, contextLength: 100_000_000 },
    ]),
  );
  target = await startTarget({
    launcher: ricLauncher(bundles),
    upstreamBaseUrl: simulator.url,
    env: { TIERS_CONFIG: JSON.stringify(tiers) },
  });
}, 120_000);

afterAll(async () => {
  await target?.stop();
  await simulator?.close();
  if (!RIC) console.info('memory-fit: aws-lambda-ric is not installed; skipped');
});

/** VmHWM (peak RSS) of each process running the completions bundle. */
function completionsPeaks(): number[] {
  const peaks: number[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readlinkSync(`/proc/${pid}/cwd`) !== bundleDir) continue;
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      peaks.push(Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024);
    } catch {
      // not ours, or gone
    }
  }
  return peaks;
}

describe('memory of the completions function at its configured size', () => {
  it('answers and bills four of the largest requests, estimated, with its peak RSS under the size', async (context) => {
    if (!target) return context.skip();
    const { accountId, key } = await newAccount(target, '1000');
    const text = 'The sea rolls on under a grey sky, and the boats come home. 海は灰色の空の下で続く。 ';
    const content = `${text.repeat(Math.floor((5.8 * MiB) / Buffer.byteLength(text)))} [[sim:tokens=50]] [[sim:no_usage]]`;
    for (const stream of [false, true, false, true]) {
      const body = JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content }], stream });
      expect(Buffer.byteLength(body)).toBeGreaterThan(5.8 * MiB);
      const response = await fetch(`${target.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body,
      });
      const reply = await response.text();
      expect(response.status).toBe(200);
      expect(stream ? reply : JSON.parse(reply).usage).toBeTruthy();
    }
    const charges = (await ledgerOf(target, accountId)).filter((entry) => entry.type === 'charge');
    expect(charges).toHaveLength(4);
    for (const charge of charges) expect(charge).toMatchObject({ estimated: true });

    const peaks = completionsPeaks();
    expect(peaks.length).toBeGreaterThan(0);
    const memoryMb = FUNCTION_SETTINGS.completions.memoryMb;
    console.info(
      `memory-fit: completions peak RSS ${peaks.map((peak) => (peak / MiB).toFixed(1)).join(', ')} MiB at ${memoryMb} MB`,
    );
    for (const peak of peaks) expect(peak).toBeLessThan((memoryMb - HEADROOM_MIB) * MiB);
  }, 180_000);
});
