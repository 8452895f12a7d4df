import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceUsage } from '../../functions/billing/pricing.js';
import { usdToNano } from '../../functions/core/money.js';
import { parseTierConfig, SIMULATOR_PRICES, singleUpstreamConfig } from '../../functions/core/tiers.js';
import { startSimulator } from '../../functions/simulator/server.js';
import { freePort } from '../../lib/local/dynamodb-local.js';
import { ledgerOf } from '../support/settled.js';
import { balanceNano, newAccount, startTarget, type Target } from '../support/target.js';

/**
 * Two upstreams behind one tier, the first failing in each way a provider fails: retries with
 * backoff, Retry-After honoured, fallback to the next target, a final 502, and no charge for a
 * failed attempt. The working target is the simulator, which demands its own credential.
 */
type Mode = '503' | '429' | 'hang' | 'drop' | 'redirect' | '401';
let mode: Mode = '503';
let hits: number[] = [];
let failing: Server;
let failingUrl: string;
let sim: Awaited<ReturnType<typeof startSimulator>>;
let target: Target;
const SIM_SECRET = 'sim-credential-value-0123456789';
const costly = { input: '50', cachedInput: '5', output: '99' };

beforeAll(async () => {
  failing = createServer((req, res) => {
    hits.push(Date.now());
    req.resume();
    if (mode === 'hang') return;
    if (mode === 'drop') return void req.socket.destroy();
    if (mode === 'redirect') {
      res.writeHead(302, { location: sim.url });
      return void res.end();
    }
    const status = Number(mode);
    res.writeHead(status, {
      'content-type': 'application/json',
      ...(status === 429 ? { 'retry-after': '1' } : {}),
    });
    res.end(JSON.stringify({ error: { message: `internal detail from ${mode}`, type: 'server_error' } }));
  });
  await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
  const address = failing.address();
  failingUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/v1`;
  sim = await startSimulator({ apiKey: SIM_SECRET });
  const closed = `http://127.0.0.1:${await freePort()}/v1`;
  const tiers = {
    'svc-fast': [
      { baseUrl: failingUrl, model: 'flaky', prices: costly },
      { baseUrl: sim.url, model: 'sim-fast', credential: 'SIM_KEY', prices: SIMULATOR_PRICES['svc-fast'] },
    ],
    'svc-pro': [
      { baseUrl: closed, model: 'gone', prices: costly },
      { baseUrl: sim.url, model: 'sim-pro', credential: 'SIM_KEY', prices: SIMULATOR_PRICES['svc-pro'] },
    ],
    'svc-heavy': [
      { baseUrl: failingUrl, model: 'flaky', prices: costly },
      { baseUrl: closed, model: 'gone', prices: costly },
    ],
  };
  target = await startTarget({
    env: {
      TIERS_CONFIG: JSON.stringify(tiers),
      SIM_KEY: SIM_SECRET,
      UPSTREAM_RETRY_BASE_MS: '50',
      UPSTREAM_FIRST_BYTE_TIMEOUT_MS: '400',
      UPSTREAM_BUDGET_MS: '4000',
    },
  });
});
afterAll(async () => {
  await target?.stop();
  await sim?.close();
  failing?.closeAllConnections();
  await new Promise((resolve) => failing?.close(resolve));
});

async function ask(key: string, model: string, stream = false) {
  const response = await fetch(`${target.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi [[sim:tokens=4]]' }], stream }),
  });
  const text = await response.text();
  return { response, text };
}

describe('retry and fallback before the first byte', () => {
  it.each([
    ['HTTP 503', '503' as Mode, 2, false],
    ['a dropped connection', 'drop' as Mode, 2, false],
    // Only a stream has a first-byte timeout shorter than its whole reply: a non-streaming upstream
    // sends its headers when the generation is done, so a JSON attempt waits until the JSON deadline.
    ['no answer within the first-byte timeout (stream)', 'hang' as Mode, 2, true],
    ['HTTP 401 (a bad credential is not retried)', '401' as Mode, 1, false],
    ['a redirect (never followed)', 'redirect' as Mode, 1, false],
  ])(
    'falls back to the next target after %s, and bills only the attempt that answered',
    async (_name, failure, attempts, stream) => {
      mode = failure;
      hits = [];
      const { accountId, key } = await newAccount(target);
      const { response, text } = await ask(key, 'svc-fast', stream);
      expect(response.status).toBe(200);
      expect(hits).toHaveLength(attempts);
      const body = (
        stream
          ? JSON.parse(
              text
                .split('\n\n')
                .filter((e) => e.startsWith('data: {'))
                .at(-1)
                ?.slice(6) ?? '{}',
            )
          : JSON.parse(text)
      ) as {
        usage: { prompt_tokens: number; completion_tokens: number; cost: number };
      };
      const [simTarget] = parseTierConfig(singleUpstreamConfig(sim.url))['svc-fast'].targets;
      if (!simTarget) throw new Error('no target');
      const expected = priceUsage(
        {
          promptTokens: body.usage.prompt_tokens,
          completionTokens: body.usage.completion_tokens,
          cachedTokens: 0,
        },
        simTarget,
      );
      expect(usdToNano(String(body.usage.cost))).toBe(expected.billedNano);
      expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(1);
      expect(5_000_000_000n - (await balanceNano(target, accountId))).toBe(expected.billedNano);
    },
  );

  it('honours Retry-After between attempts on a 429', async () => {
    mode = '429';
    hits = [];
    const { key } = await newAccount(target);
    const { response } = await ask(key, 'svc-fast', true);
    expect(response.status).toBe(200);
    expect(hits).toHaveLength(2);
    expect((hits[1] ?? 0) - (hits[0] ?? 0)).toBeGreaterThanOrEqual(950);
  });

  it('falls back past a refused connection', async () => {
    const { key } = await newAccount(target);
    const { response } = await ask(key, 'svc-pro', true);
    expect(response.status).toBe(200);
  });

  it.each([false, true])(
    'gives up with 502 when every target fails (stream %s), within the budget and charging nothing',
    async (stream) => {
      mode = '503';
      hits = [];
      const { accountId, key } = await newAccount(target);
      const started = Date.now();
      const { response, text } = await ask(key, 'svc-heavy', stream);
      expect(response.status).toBe(502);
      expect(Date.now() - started).toBeLessThan(4_500);
      expect(hits).toHaveLength(2);
      expect(text).not.toContain('internal detail');
      expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
      expect(await balanceNano(target, accountId)).toBe(5_000_000_000n);
    },
  );

  it('never shows the upstream credential to the client', async () => {
    mode = '503';
    const { key } = await newAccount(target);
    for (const model of ['svc-fast', 'svc-heavy']) {
      const { response, text } = await ask(key, model, true);
      expect(text).not.toContain(SIM_SECRET);
      expect(JSON.stringify([...response.headers])).not.toContain(SIM_SECRET);
    }
  });
});
