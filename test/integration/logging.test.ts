import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BILLED_SEARCH } from '../../lib/infra/api-stack.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The functions' structured logs: one JSON line per settled generation (`generation usage`, written
 * before the settlement) with request id, account id, key id, generation id, tier, tokens, cost and
 * latency, and one EMF metrics line; never a key, a prompt or a completion.
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
      // The function runs in its own thread (as in Lambda, its own environment): its log lines
      // reach this process's stdout shortly after, not necessarily before, the response.
      const until = Date.now() + 5_000;
      while (!lines.some((l) => l.includes('BilledMicroUsd')) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      const records = lines.flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
      // A settled generation writes two lines: its usage record and its metrics.
      const own = records.filter((r) => JSON.stringify(r).includes(generationId ?? '-'));
      const usage = own.find((r) => r.message === 'generation usage');
      expect(own.map((r) => r.message ?? 'metrics')).toEqual(['generation usage']);
      expect(usage).toMatchObject({
        level: 'INFO',
        record: { accountId, keyId, generationId, tier: 'svc-pro', completionTokens: 6, estimated: false },
        function_request_id: response.headers.get('x-request-id'),
      });
      expect(typeof usage?.billedUsd).toBe('string');
      expect(typeof usage?.latencyMs).toBe('number');
      expect(typeof (usage?.record as { promptTokens?: unknown } | undefined)?.promptTokens).toBe('number');
      expect(records.filter((r) => r._aws).length).toBe(1);
      const all = lines.join('\n');
      expect(all).not.toContain(key);
      expect(all).not.toContain('secret-prompt');
      if (completion) expect(all).not.toContain(completion.trim());
      // Metrics go out as CloudWatch EMF lines on the same stream. The billed amount is published per
      // tier, the dimension set the stack's dashboard searches (lib/infra/api-stack.ts BILLED_SEARCH).
      type Emf = { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
      const billed = records.find((r) =>
        (r._aws as Emf | undefined)?.CloudWatchMetrics.some((m) =>
          m.Metrics.some((x) => x.Name === 'BilledMicroUsd'),
        ),
      );
      expect((billed?._aws as Emf | undefined)?.CloudWatchMetrics[0]?.Dimensions).toEqual([
        ['service', 'tier'],
      ]);
      expect(BILLED_SEARCH).toContain('{HostedModelApi,service,tier}');
      expect(billed?.tier).toBe('svc-pro');
    },
  );
});
