import { describe, expect, it } from 'vitest';
import {
  chargeItem,
  holdItem,
  keyItem,
  toAccount,
  toHold,
  toKey,
  toLedgerEntry,
  toPrincipal,
  topUpItem,
} from '../../../functions/adapters/dynamodb/items.js';
import type { ChargeEntry, Hold, KeyRecord } from '../../../functions/core/store.js';

const key: KeyRecord = {
  keyHash: 'a'.repeat(64),
  keyId: 'key_0123456789abcdef',
  accountId: 'acct',
  name: 'ci',
  displayPrefix: 'svc_live_abcd...',
  status: 'active',
  createdAt: '2026-01-01T00:00:00.000Z',
};

const charge: ChargeEntry = {
  accountId: 'acct',
  generationId: 'gen-1767225600-AAAAAAAAAAAAAAAAAAAA',
  keyId: key.keyId,
  tier: 'svc-fast',
  upstreamModel: 'sim-fast',
  promptTokens: 12,
  completionTokens: 7,
  cachedTokens: 3,
  upstreamCostUsd: '0.000012345678901234567891',
  // Past 2^53: a float would lose it.
  billedNano: 9_007_199_254_740_993n,
  estimated: true,
  usageAdjusted: 'completion_tokens 1000 > bound 32',
  user: 'end-user-7',
  finishReason: 'length',
  createdAt: '2026-01-01T00:00:01.000Z',
};

describe('DynamoDB items', () => {
  it('round-trips a key, revoked or not', () => {
    expect(toKey(keyItem(key))).toEqual(key);
    const revoked = { ...key, status: 'revoked' as const, revokedAt: '2026-01-02T00:00:00.000Z' };
    expect(toKey(keyItem(revoked))).toEqual(revoked);
  });

  it('reads a charge back as a ledger entry with its exact amount, and optional fields only when present', () => {
    expect(toLedgerEntry(chargeItem(charge))).toEqual({
      entryId: charge.generationId,
      type: 'charge',
      createdAt: charge.createdAt,
      deltaNano: -charge.billedNano,
      tier: 'svc-fast',
      keyId: key.keyId,
      user: 'end-user-7',
      promptTokens: 12,
      completionTokens: 7,
      cachedTokens: 3,
      estimated: true,
      usageAdjusted: charge.usageAdjusted,
      finishReason: 'length',
    });
    const { usageAdjusted: _a, user: _u, finishReason: _f, ...plain } = charge;
    const entry = toLedgerEntry(chargeItem({ ...plain, estimated: false }));
    expect(entry).not.toHaveProperty('user');
    expect(entry).not.toHaveProperty('usageAdjusted');
    expect(entry).not.toHaveProperty('finishReason');
    expect(chargeItem(charge).amountNanoUsd).toEqual({ N: '9007199254740993' });
  });

  it('reads a top-up back with its reference and a positive amount', () => {
    expect(
      toLedgerEntry(topUpItem('acct', 'topup#pay-1', 'pay-1', 5_000_000_000n, charge.createdAt)),
    ).toEqual({
      entryId: 'topup#pay-1',
      type: 'topup',
      createdAt: charge.createdAt,
      deltaNano: 5_000_000_000n,
      reference: 'pay-1',
    });
  });

  it('round-trips a hold', () => {
    const hold: Hold = {
      accountId: 'acct',
      holdId: charge.generationId,
      amountNano: 123_456_789n,
      expiresAt: 1_767_225_900_000,
      createdAt: charge.createdAt,
    };
    expect(toHold(holdItem(hold))).toEqual(hold);
  });

  it('builds a principal from a key and its account; an account without heldNano holds nothing', () => {
    const account = { accountId: { S: 'acct' }, status: { S: 'suspended' }, creditBalance: { N: '-5' } };
    expect(toPrincipal(keyItem(key), account)).toMatchObject({
      keyId: key.keyId,
      accountId: 'acct',
      keyStatus: 'active',
      accountStatus: 'suspended',
      balanceNano: -5n,
      heldNano: 0n,
    });
    expect(toAccount(account)).toMatchObject({ accountId: 'acct', status: 'suspended', balanceNano: -5n });
  });
});
