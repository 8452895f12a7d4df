import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Billable, price } from '../../../functions/billing/bill.js';
import { worstCaseBilledNano } from '../../../functions/billing/holds.js';
import type { TokenUsage } from '../../../functions/billing/pricing.js';
import {
  readUsageRecord,
  signUsageRecord,
  usageRecordOf,
  usageRecordOutOfBounds,
  usageRecordSigned,
} from '../../../functions/billing/usage-record.js';
import { newGenerationId } from '../../../functions/core/ids.js';
import type { ChargeEntry, Hold } from '../../../functions/core/store.js';
import type { TierConfig, UpstreamTarget } from '../../../functions/core/tiers.js';
import { chargeEntry, PRICED_TARGET } from '../../support/fixtures.js';
import { SIMULATOR_TIERS } from '../../support/usage-lines.js';

/**
 * A usage record as the log-reading billers take it: its slice is the one its generation id names,
 * never what it says; its signature is over its exact text; and what it bills is held to what its
 * generation could have cost, which every bill the completions function makes passes.
 */
const NOW = Date.UTC(2026, 0, 1);

function onSlice(slice: number) {
  const generationId = newGenerationId(NOW, slice);
  const entry = chargeEntry('acct', 'key', 1_300n, { generationId, ...(slice ? { slice } : {}) });
  const hold: Hold = {
    accountId: 'acct',
    holdId: generationId,
    amountNano: 5_000n,
    expiresAt: NOW + 60_000,
    createdAt: entry.createdAt,
    ...(slice ? { slice } : {}),
  };
  return {
    entry,
    hold,
    record: JSON.parse(JSON.stringify(usageRecordOf(entry, hold))) as Record<string, unknown>,
  };
}

describe('readUsageRecord: the slice', () => {
  it('is the one the generation id names, for the entry and its hold, whether the record states it or not', () => {
    const { record } = onSlice(7);
    const stated = readUsageRecord(record);
    expect(stated?.entry.slice).toBe(7);
    expect(stated?.hold?.slice).toBe(7);
    const { slice: _omitted, hold, ...bare } = record;
    const { slice: _holdOmitted, ...bareHold } = hold as Record<string, unknown>;
    const omitted = readUsageRecord({ ...bare, hold: bareHold });
    expect(omitted?.entry.slice).toBe(7);
    expect(omitted?.hold?.slice).toBe(7);
    // Slice 0 is the account item: no slice on the entry.
    expect(readUsageRecord(onSlice(0).record)?.entry).not.toHaveProperty('slice');
  });

  it('refuses a record, or a hold, that states another slice than its id names', () => {
    const { record } = onSlice(7);
    expect(readUsageRecord({ ...record, slice: 3 })).toBeUndefined();
    expect(readUsageRecord({ ...record, slice: 0 })).toBeUndefined();
    expect(readUsageRecord({ ...record, hold: { ...(record.hold as object), slice: 3 } })).toBeUndefined();
    expect(readUsageRecord({ ...onSlice(0).record, slice: 7 })).toBeUndefined();
  });

  it("refuses a hold that is not its own generation's", () => {
    const { record } = onSlice(2);
    const hold = record.hold as Record<string, unknown>;
    expect(readUsageRecord({ ...record, hold: { ...hold, accountId: 'other' } })).toBeUndefined();
    expect(
      readUsageRecord({ ...record, hold: { ...hold, holdId: newGenerationId(NOW, 2) } }),
    ).toBeUndefined();
  });
});

describe('the signature of a record', () => {
  const text = JSON.stringify(onSlice(0).record);

  it('verifies under its key (or any key given, a rotation), and under no other', () => {
    const signature = signUsageRecord(text, 'key-1');
    expect(signature).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(usageRecordSigned(text, signature, ['key-1'])).toBe(true);
    expect(usageRecordSigned(text, signature, ['key-2', 'key-1'])).toBe(true);
    expect(usageRecordSigned(text, signature, ['key-2'])).toBe(false);
    expect(usageRecordSigned(text, signature, [])).toBe(false);
    expect(usageRecordSigned(text, `${signature}x`, ['key-1'])).toBe(false);
    expect(usageRecordSigned(text, '', ['key-1'])).toBe(false);
  });

  it('does not verify for any change of the text', () => {
    const signature = signUsageRecord(text, 'key-1');
    expect(usageRecordSigned(text.replace('"acct"', '"acct2"'), signature, ['key-1'])).toBe(false);
    expect(usageRecordSigned(text.replace('"1300"', '"1301"'), signature, ['key-1'])).toBe(false);
    expect(usageRecordSigned(`${text} `, signature, ['key-1'])).toBe(false);
  });
});

describe('usageRecordOutOfBounds', () => {
  // 100 prompt + 1,000 completion tokens at svc-fast's simulator prices: $0.001127 at most x1 (the
  // simulator's targets report their cost: up to x3 + $0.00001).
  const within = (fields: Partial<ChargeEntry> = {}) =>
    chargeEntry('acct', 'key', 1_300_000n, {
      promptTokens: 100,
      completionTokens: 1_000,
      upstreamCostUsd: '0.001',
      ...fields,
    });

  it('passes a bill that is its cost x 1.3, within its tokens at the dearest target, its tier and its hold', () => {
    expect(usageRecordOutOfBounds(within(), undefined, SIMULATOR_TIERS)).toBeUndefined();
    const hold = { accountId: 'acct', holdId: 'h', amountNano: 1_300_000n, expiresAt: 0, createdAt: '' };
    expect(usageRecordOutOfBounds(within(), hold, SIMULATOR_TIERS)).toBeUndefined();
  });

  it.each([
    ['a bill that is not its cost x 1.3', { billedNano: 10n ** 15n }, /not its upstream cost/],
    [
      'a cost above its tokens at the dearest target',
      { upstreamCostUsd: '1000000', billedNano: 1_300_000_000_000_000n },
      /what its tokens cost/,
    ],
    ['more completion tokens than the tier allows', { completionTokens: 128_017 }, /completion tokens/],
    ['more prompt tokens than any request', { promptTokens: 10 ** 12 }, /prompt tokens/],
    ['more cached tokens than prompt tokens', { cachedTokens: 101 }, /cached tokens/],
    ['a tier that is not configured', { tier: 'svc-gold' }, /not configured/],
    ['an inherited name for a tier', { tier: 'constructor' }, /not configured/],
  ] as const)('refuses %s', (_, fields, reason) => {
    expect(
      usageRecordOutOfBounds(within(fields as Partial<ChargeEntry>), undefined, SIMULATOR_TIERS),
    ).toMatch(reason);
  });

  it('refuses a bill above its hold', () => {
    const hold = { accountId: 'acct', holdId: 'h', amountNano: 1_299_999n, expiresAt: 0, createdAt: '' };
    expect(usageRecordOutOfBounds(within(), hold, SIMULATOR_TIERS)).toMatch(/its hold/);
  });

  it('passes every bill the completions function makes, held to the hold it placed', async () => {
    const cheap: UpstreamTarget = {
      ...PRICED_TARGET,
      model: 'cheap',
      reportsCost: false,
      prices: {
        input: 10n ** 14n,
        cachedInput: 10n ** 13n,
        output: 3n * 10n ** 14n,
        cacheWrite: 2n * 10n ** 14n,
      },
    };
    const tier = { targets: [PRICED_TARGET, cheap], maxOutputTokens: 4_096, contextLength: 32_000 };
    const tiers = { 'svc-fast': tier, 'svc-pro': tier, 'svc-heavy': tier } as TierConfig;
    const count = fc.integer({ min: 0, max: 200_000 });
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          target: fc.constantFrom(PRICED_TARGET, cheap),
          promptBound: fc.integer({ min: 1, max: 100_000 }),
          outputCap: fc.integer({ min: 1, max: 32_000 }),
          text: fc.string({ maxLength: 300 }),
          cut: fc.boolean(),
          usage: fc.option(
            fc.record({
              promptTokens: count,
              completionTokens: count,
              cachedTokens: count,
              cacheWriteTokens: fc.option(count, { nil: undefined }),
              reasoningTokens: fc.option(count, { nil: undefined }),
              reportedCostUsd: fc.option(
                fc
                  .tuple(fc.nat(50), fc.nat(999_999_999))
                  .map(([u, f]) => `${u}.${String(f).padStart(9, '0')}`),
                { nil: undefined },
              ),
            }),
            { nil: undefined },
          ),
        }),
        async ({ target, promptBound, outputCap, text, cut, usage }) => {
          const generationId = newGenerationId(NOW, 0);
          const amountNano = worstCaseBilledNano(promptBound, outputCap, tier.targets);
          const hold: Hold = {
            accountId: 'acct-1',
            holdId: generationId,
            amountNano,
            expiresAt: NOW,
            createdAt: '',
          };
          const billable: Billable = {
            id: generationId,
            caller: {
              keyId: 'key-1',
              accountId: 'acct-1',
              keyStatus: 'active',
              accountStatus: 'active',
              balanceNano: 10n ** 12n,
              heldNano: amountNano,
            },
            request: {
              model: 'svc-fast',
              messages: [{ role: 'user', content: 'hi' }],
            } as Billable['request'],
            target,
            deadlines: {
              startedAt: NOW,
              estimate: Date.now() + 60_000,
              settleCallBy: () => Date.now() + 5_000,
            },
            outputCap,
            promptBound,
            bodyBytes: 100,
            hold,
          };
          const defined =
            usage &&
            (Object.fromEntries(
              Object.entries(usage).filter(([, v]) => v !== undefined),
            ) as unknown as TokenUsage);
          const report = defined && { usage: defined, raw: {}, notes: [] };
          const bill = await price(billable, { report, text, notes: [], finishReason: 'stop', cut });
          // As the log carries it: JSON, read back field by field.
          const read = readUsageRecord(JSON.parse(JSON.stringify(usageRecordOf(bill.entry, hold))));
          expect(read).toBeDefined();
          if (!read) return;
          expect(usageRecordOutOfBounds(read.entry, read.hold, tiers)).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });
});
