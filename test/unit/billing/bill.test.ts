import { describe, expect, it } from 'vitest';
import { type Billable, type Delivered, price } from '../../../functions/billing/bill.js';
import type { UsageReport } from '../../../functions/core/usage.js';
import { PRICED_TARGET } from '../../support/fixtures.js';

/**
 * The bill of one generation, priced directly (no relay, no handler): the usage decided (report or
 * estimate), held to its bounds, priced at the table or the upstream's own cost, rounded up to the
 * nano-USD, and the ledger entry that records it.
 */
const STARTED_AT = Date.UTC(2026, 0, 1);

const target = PRICED_TARGET;

function billable(overrides: Partial<Billable> = {}): Billable {
  return {
    id: 'gen-1767225600-BILLBILLBILLBILLBILL',
    caller: {
      keyId: 'key-1',
      accountId: 'acct-1',
      keyStatus: 'active',
      accountStatus: 'active',
      balanceNano: 10n ** 9n,
      heldNano: 0n,
    },
    request: { model: 'svc-fast', messages: [{ role: 'user', content: 'Say hi' }] } as Billable['request'],
    target,
    deadlines: {
      startedAt: STARTED_AT,
      estimate: Date.now() + 60_000,
      settleCallBy: () => Date.now() + 5_000,
    },
    outputCap: 1_000,
    promptBound: 10_000,
    bodyBytes: 100,
    hold: undefined,
    ...overrides,
  };
}

const reported = (usage: Extract<UsageReport, { usage: unknown }>['usage']): UsageReport => ({
  usage,
  raw: {},
  notes: [],
});

function delivered(overrides: Partial<Delivered> = {}): Delivered {
  return {
    report: undefined,
    text: 'x'.repeat(600),
    notes: [],
    finishReason: 'stop',
    cut: false,
    ...overrides,
  };
}

describe('price: the bill of what was delivered', () => {
  it('prices a report at the table, x1.3: 1,000 prompt ($0.001) + 500 completion ($0.001) = $0.0026', async () => {
    const bill = await price(
      billable(),
      delivered({ report: reported({ promptTokens: 1_000, completionTokens: 500, cachedTokens: 0 }) }),
    );
    expect(bill.billedNano).toBe(2_600_000n);
    expect(bill.usage).toEqual({ promptTokens: 1_000, completionTokens: 500, cachedTokens: 0 });
    expect(bill.entry).toEqual({
      accountId: 'acct-1',
      generationId: 'gen-1767225600-BILLBILLBILLBILLBILL',
      keyId: 'key-1',
      tier: 'svc-fast',
      upstreamModel: 'upstream-model',
      promptTokens: 1_000,
      completionTokens: 500,
      cachedTokens: 0,
      upstreamCostUsd: '0.002',
      billedNano: 2_600_000n,
      estimated: false,
      finishReason: 'stop',
      createdAt: '2026-01-01T00:00:00.000Z',
    });
  });

  it("prices the upstream's own reported cost over the table, rounded up to the nano-USD", async () => {
    // 0.000123456 x 1.3 = 0.0001604928 USD: 160,492.8 nano-USD, billed 160,493.
    const usage = {
      promptTokens: 1_000,
      completionTokens: 500,
      cachedTokens: 0,
      reportedCostUsd: '0.000123456',
    };
    const bill = await price(billable(), delivered({ report: reported(usage) }));
    expect(bill.billedNano).toBe(160_493n);
    expect(bill.entry.upstreamCostUsd).toBe('0.000123456');
  });

  it('takes the table, not a reported cost, from a target that does not report its own', async () => {
    const usage = {
      promptTokens: 1_000,
      completionTokens: 500,
      cachedTokens: 0,
      reportedCostUsd: '0.000123456',
    };
    const bill = await price(
      billable({ target: { ...target, reportsCost: false } }),
      delivered({ report: reported(usage) }),
    );
    expect(bill.billedNano).toBe(2_600_000n);
  });

  it('rounds a fraction of a nano-USD up: one prompt token at $1/M is $0.0000013', async () => {
    const bill = await price(
      billable(),
      delivered({ report: reported({ promptTokens: 1, completionTokens: 0, cachedTokens: 0 }) }),
    );
    expect(bill.billedNano).toBe(1_300n);
    const tiny = await price(
      billable({ target: { ...target, prices: { input: 1n, cachedInput: 1n, output: 1n } } }),
      delivered({ report: reported({ promptTokens: 1, completionTokens: 0, cachedTokens: 0 }) }),
    );
    // 1e-21 USD x 1.3, far below a nano-USD: still one.
    expect(tiny.billedNano).toBe(1n);
  });

  it('bills a report beyond its bounds at the bounds, and says so on the entry', async () => {
    const bill = await price(
      billable({ outputCap: 100, promptBound: 2_000 }),
      delivered({
        text: 'hi',
        report: reported({ promptTokens: 1_000_000, completionTokens: 1_000_000_000, cachedTokens: 0 }),
      }),
    );
    // Completion: 2 bytes of text + 16; prompt: the bound.
    expect(bill.usage).toEqual({ promptTokens: 2_000, completionTokens: 18, cachedTokens: 0 });
    // 2,000 x $1/M + 18 x $2/M = $0.002036, x1.3
    expect(bill.billedNano).toBe(2_646_800n);
    expect(bill.entry.usageAdjusted).toBe(
      'completion_tokens 1000000000 > bound 18; prompt_tokens 1000000 > bound 2000',
    );
  });

  it("estimates a cut stream's completion from the delivered text, and drops the reported cost", async () => {
    const usage = { promptTokens: 1_000, completionTokens: 900, cachedTokens: 0, reportedCostUsd: '0.5' };
    const bill = await price(
      billable(),
      delivered({
        text: 'hello',
        report: reported(usage),
        cut: true,
        notes: ['stream cut at the output cap'],
        finishReason: 'length',
      }),
    );
    // "hello" is one o200k token.
    expect(bill.usage).toEqual({ promptTokens: 1_000, completionTokens: 1, cachedTokens: 0 });
    expect(bill.billedNano).toBe(1_302_600n);
    expect(bill.entry).toMatchObject({
      estimated: true,
      finishReason: 'length',
      usageAdjusted: 'stream cut at the output cap; completion tokens estimated from the delivered text',
    });
  });

  it('estimates prompt and completion when the upstream sent no usable report', async () => {
    const bill = await price(
      billable(),
      delivered({ text: 'hello', report: { invalid: 'not an object', raw: 7 } }),
    );
    expect(bill.entry.estimated).toBe(true);
    expect(bill.usage.completionTokens).toBe(1);
    expect(bill.usage.promptTokens).toBeGreaterThan(0);
    expect(bill.entry.usageAdjusted).toBe('unusable usage report: not an object');
  });

  it('records the end user, cut to 256 characters, and the balance slice', async () => {
    const request = {
      model: 'svc-fast',
      messages: [],
      user: 'u'.repeat(300),
    } as unknown as Billable['request'];
    const caller = { ...billable().caller, slice: 3 };
    const bill = await price(
      billable({ request, caller }),
      delivered({ report: reported({ promptTokens: 1, completionTokens: 1, cachedTokens: 0 }) }),
    );
    expect(bill.entry.user).toBe('u'.repeat(256));
    expect(bill.entry.slice).toBe(3);
  });
});
