import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENERATION_USAGE_MESSAGE } from '../../functions/billing/usage-line.js';
import { GENERATION_METRIC_DIMENSIONS, GENERATION_METRICS } from '../../lib/infra/generation-metrics.js';
import { settled } from '../support/settled.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The functions' structured logs: one JSON line per settled generation (`generation usage`, written
 * before the settlement) with request id, account id, key id, generation id, tier, tokens, cost and
 * latency, from which CloudWatch reads the generation's metrics; never a key, a prompt or a completion.
 */
let target: Target;
const lines: string[] = [];
const realWrite = process.stdout.write.bind(process.stdout);

beforeAll(async () => {
  target = await startTarget({ env: { LOG_LEVEL: 'INFO', POWERTOOLS_METRICS_DISABLED: 'false' } });
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return realWrite(chunk, ...(rest as []));
  }) as typeof process.stdout.write;
});
afterAll(async () => {
  process.stdout.write = realWrite;
  await target?.stop();
});

describe('structured logs', () => {
  it.each([false, true])(
    'record a settled generation without its key, prompt or completion (stream %s)',
    async (stream) => {
      const { accountId, key, keyId } = await newAccount(target);
      const prompt = `secret-prompt-${Math.random()} [[sim:tokens=6]]`;
      lines.length = 0;
      const response = await fetch(`${target.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: prompt }], stream }),
      });
      const text = await response.text();
      const generationId = response.headers.get('x-generation-id');
      const completion = stream
        ? ''
        : ((JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]?.message
            .content ?? '');
      // The function runs in its own thread (as in Lambda, its own environment): its log lines reach
      // this process's stdout shortly after the invocation ends (its settlement included).
      await settled(target);
      const until = Date.now() + 5_000;
      while (!lines.some((l) => l.includes(generationId ?? '-')) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      const records = lines.flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
      // A settled generation writes one line, its usage record: no metrics line of its own.
      expect(records.map((r) => r.message ?? 'metrics')).toEqual([GENERATION_USAGE_MESSAGE]);
      const usage = records[0];
      expect(usage).toMatchObject({
        level: 'INFO',
        record: { accountId, keyId, generationId, tier: 'svc-pro', completionTokens: 6, estimated: false },
        function_request_id: response.headers.get('x-request-id'),
      });
      expect(typeof usage?.billedUsd).toBe('string');
      expect(typeof usage?.latencyMs).toBe('number');
      // The stack's metric filters read the generation's metrics from this line: each path names a
      // number, the dimension the tier (lib/infra/generation-metrics.ts).
      const at = (path: string) =>
        path
          .slice(2)
          .split('.')
          .reduce<unknown>((value, key) => (value as Record<string, unknown> | undefined)?.[key], usage);
      for (const { value } of GENERATION_METRICS) expect(typeof at(value)).toBe('number');
      expect(at('$.record.promptTokens')).toBeGreaterThan(0);
      expect(at('$.billedMicroUsd')).toBe(Number(BigInt(String(at('$.record.billedNano'))) / 1000n));
      expect(at(GENERATION_METRIC_DIMENSIONS.tier)).toBe('svc-pro');
      const all = lines.join('\n');
      expect(all).not.toContain(key);
      expect(all).not.toContain('secret-prompt');
      if (completion) expect(all).not.toContain(completion.trim());
    },
  );
});
