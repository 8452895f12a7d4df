import { countTokens } from 'gpt-tokenizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/core/money.js';
import { singleUpstreamConfig } from '../../functions/core/tiers.js';
import { COUNT_SLICE } from '../../functions/core/tokens.js';
import { startSimulator } from '../../functions/simulator/server.js';
import { ledgerOf } from '../support/settled.js';
import { readSse } from '../support/sse.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/** A generation longer than the function may run: it ends, settled, before Lambda would kill it. */
const START = 5_000_000_000n;

describe('a generation that would outlive the function', () => {
  let short: Target;
  beforeAll(async () => {
    // A 6 s function with a 4 s settlement reserve: the relay must stop reading at 2 s, and the emulator
    // kills the invocation at 6 s as Lambda does, so anything not settled by then is lost. The reserve
    // leaves a busy machine time for the estimate (the tokenizer loads) and the transaction.
    short = await startTarget({
      functions: { completions: { timeoutMs: 6_000 } },
      env: { SETTLE_RESERVE_MS: '4000', KEEPALIVE_INTERVAL_MS: '200' },
    });
  });
  afterAll(async () => {
    await short?.stop();
  });

  it('ends before the deadline with a length finish carrying the usage, then [DONE], billed once', async () => {
    const { accountId, key } = await newAccount(short);
    const started = Date.now();
    const response = await fetch(`${short.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: 'long [[sim:tokens=200]] [[sim:delay_ms=50]]' }],
        stream: true,
      }),
    });
    const { data } = await readSse(response);
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.at(-1).choices[0].finish_reason).toBe('length');
    const usage = chunks.at(-1).usage;
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeLessThan(200);
    const ledger = (await ledgerOf(short, accountId)).filter((e) => e.type === 'charge');
    expect(ledger).toHaveLength(1);
    expect(ledger[0]?.estimated).toBe(true);
    expect(START - (await balanceNano(short, accountId))).toBe(usdToNano(String(usage.cost)));
  });
});

describe('an estimate that cannot finish counting before the settlement deadline', () => {
  let short: Target;
  let simulator: Awaited<ReturnType<typeof startSimulator>> | undefined;
  beforeAll(async () => {
    // A 4 s function: a JSON reply must settle by 3 s, and an estimate stops counting 3 s before that,
    // so here it counts one slice and estimates the rest at that slice's rate. Tiers with a context
    // length the prompt's bytes cannot reach, so that the context-length check does not count it
    // first (a count it finished would be the estimate's, exact).
    simulator = await startSimulator({ port: 0 });
    const tiers = Object.fromEntries(
      Object.entries(singleUpstreamConfig(simulator.url)).map(([id, targets]) => [
        id,
        { targets, contextLength: 100_000_000 },
      ]),
    );
    short = await startTarget({
      functions: { completions: { timeoutMs: 4_000 } },
      upstreamBaseUrl: simulator.url,
      env: { SETTLE_RESERVE_MS: '2000', TIERS_CONFIG: JSON.stringify(tiers) },
    });
  });
  afterAll(async () => {
    await short?.stop();
    await simulator?.close();
  });

  it('bills the generation in time, the rest of the prompt estimated at the counted rate, and says so', async () => {
    const { accountId, key } = await newAccount(short);
    const sentence = 'The sea rolls on under a grey sky, and the boats come home before the rain. ';
    const prompt = sentence.repeat(Math.ceil((8 * COUNT_SLICE) / sentence.length));
    const response = await fetch(`${short.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-fast',
        messages: [{ role: 'user', content: `${prompt} [[sim:tokens=5]] [[sim:no_usage]]` }],
      }),
    });
    expect(response.status).toBe(200);
    const { usage } = (await response.json()) as { usage: { prompt_tokens: number; cost: number } };
    const [charge] = (await ledgerOf(short, accountId)).filter((e) => e.type === 'charge');
    expect(charge).toMatchObject({ estimated: true, promptTokens: usage.prompt_tokens });
    expect(charge?.usageAdjusted).toMatch(/not counted in time, estimated at the counted rate/);
    const exact = countTokens(`${prompt} [[sim:tokens=5]] [[sim:no_usage]]`) + 6;
    expect(Math.abs(usage.prompt_tokens - exact) / exact).toBeLessThan(0.02);
    expect(START - (await balanceNano(short, accountId))).toBe(usdToNano(String(usage.cost)));
  });
});
