import { randomBytes } from 'node:crypto';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { DASHBOARD_TABLE_ENV, LOCAL_DASHBOARD_TABLE_NAME } from '../../functions/adapters/dynamodb/schema.js';
import { generateApiKey } from '../../functions/core/auth.js';
import { newGenerationId } from '../../functions/core/ids.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  type Hold,
  type Store,
  TooManyKeysError,
} from '../../functions/core/store.js';
import {
  ensureDashboardTable,
  ensureTables,
  ensureTeamTables,
  localClient,
} from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { watchDynamoCalls } from '../support/dynamo-calls.js';
import { accountWith, chargeEntry, keyFor } from '../support/fixtures.js';
import { MemoryStore } from '../support/memory-store.js';
import { localTeamTables } from '../support/team-tables.js';

/**
 * The store port's contract, run against both of its implementations: the DynamoDB adapter (on
 * DynamoDB Local) and the in-memory store the unit tests of the request path use. What the unit
 * tests learn from the memory store holds only if it answers as the adapter does; each case here
 * is one promise of functions/core/store.ts.
 */
const tables = localTableNames(`contract${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
beforeAll(async () => {
  await ensureTables(client, tables);
  // The dashboard's items (sessions) are in the table the adapter finds by its environment.
  await ensureDashboardTable(client, process.env[DASHBOARD_TABLE_ENV] ?? LOCAL_DASHBOARD_TABLE_NAME);
  // So are the team's and the audit log's (an account's items are under its random id).
  await ensureTeamTables(client, localTeamTables());
});

const stores: [string, () => Store][] = [
  ['in memory', () => new MemoryStore()],
  ['DynamoDB', () => new DynamoStore(client, tables)],
];

let counter = 0;
const now = () => new Date().toISOString();

describe.each(stores)('the store %s', (_name, make) => {
  const store = make();

  /** An account with `nano` of credit and a key; nothing is shared between cases. */
  async function account(nano: bigint) {
    counter += 1;
    const made = await accountWith(store, '0', `contract-${randomBytes(4).toString('hex')}-${counter}`);
    if (nano > 0n) await store.topUp(made.accountId, 'initial', nano, now());
    return made;
  }

  const charge = chargeEntry;

  const hold = (accountId: string, amountNano: bigint, expiresAt = Date.now() + 60_000): Hold => ({
    accountId,
    holdId: newGenerationId(),
    amountNano,
    expiresAt,
    createdAt: now(),
  });

  it('creates an account with its initial credits as one top-up entry, and refuses a second with its id', async () => {
    counter += 1;
    const accountId = `contract-${randomBytes(4).toString('hex')}-${counter}`;
    await store.createAccount(accountId, 5_000n, now());
    expect(await store.getAccount(accountId)).toMatchObject({
      accountId,
      status: 'active',
      balanceNano: 5_000n,
      heldNano: 0n,
      slices: 1,
    });
    expect(await store.listLedger(accountId)).toMatchObject([
      { entryId: 'topup#initial-credits', type: 'topup', deltaNano: 5_000n },
    ]);
    await expect(store.createAccount(accountId, 1n, now())).rejects.toBeInstanceOf(AccountExistsError);
    expect(await store.listAccountIds()).toContain(accountId);
  });

  it('makes an account of 0 with no ledger entry', async () => {
    const { accountId } = await account(0n);
    expect(await store.listLedger(accountId)).toEqual([]);
  });

  it('reads a key and its account fresh: revocation and suspension are seen at once', async () => {
    const { accountId, keyHash, keyId } = await account(1_000n);
    expect(await store.loadPrincipal(keyHash)).toMatchObject({
      keyId,
      accountId,
      keyStatus: 'active',
      accountStatus: 'active',
      balanceNano: 1_000n,
      heldNano: 0n,
    });
    await store.setAccountStatus(accountId, 'suspended', now());
    expect((await store.loadPrincipal(keyHash))?.accountStatus).toBe('suspended');
    const key = await store.findKeyById(keyId);
    expect(key?.keyHash).toBe(keyHash);
    expect((await store.revokeKey(keyHash, now())).status).toBe('revoked');
    expect((await store.loadPrincipal(keyHash))?.keyStatus).toBe('revoked');
    expect(await store.loadPrincipal(generateApiKey().keyHash)).toBeUndefined();
    expect((await store.listKeys(accountId)).map((k) => k.keyId)).toEqual([keyId]);
    await expect(store.setAccountStatus('no-such-account', 'banned', now())).rejects.toBeInstanceOf(
      AccountNotFoundError,
    );
  });

  /** A key record of `accountId` (its full key unused). */
  const keyRecord = (accountId: string) => {
    const made = generateApiKey();
    return {
      keyHash: made.keyHash,
      keyId: made.keyId,
      accountId,
      name: 'contract',
      displayPrefix: made.displayPrefix,
      status: 'active' as const,
      createdAt: now(),
    };
  };
  const active = async (accountId: string) =>
    (await store.listKeys(accountId)).filter((k) => k.status === 'active').length;

  it('holds an account to maxActive active keys as a condition of the write; a revoked key frees a place', async () => {
    const { accountId, keyHash } = await account(0n);
    await store.createKey(keyRecord(accountId), { maxActive: 2 });
    await expect(store.createKey(keyRecord(accountId), { maxActive: 2 })).rejects.toBeInstanceOf(
      TooManyKeysError,
    );
    expect(await active(accountId)).toBe(2);
    // Without the bound (the operator's CLI): made, and counted.
    await store.createKey(keyRecord(accountId));
    await expect(store.createKey(keyRecord(accountId), { maxActive: 3 })).rejects.toBeInstanceOf(
      TooManyKeysError,
    );
    await store.revokeKey(keyHash, now());
    // A second revocation of the same key frees nothing more.
    await store.revokeKey(keyHash, now());
    await store.createKey(keyRecord(accountId), { maxActive: 3 });
    await expect(store.createKey(keyRecord(accountId), { maxActive: 3 })).rejects.toBeInstanceOf(
      TooManyKeysError,
    );
    expect(await active(accountId)).toBe(3);
    await expect(store.createKey(keyRecord('no-such-account'), { maxActive: 3 })).rejects.toBeInstanceOf(
      AccountNotFoundError,
    );
  });

  it('30 keys created at once on an account with 10 active: exactly 20 active, the rest refused', async () => {
    const { accountId } = await account(0n);
    for (let i = 1; i < 10; i++) await store.createKey(keyRecord(accountId));
    expect(await active(accountId)).toBe(10);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 30 }, () => store.createKey(keyRecord(accountId), { maxActive: 20 })),
    );
    const refused = outcomes.filter((o) => o.status === 'rejected');
    expect(outcomes.length - refused.length).toBe(10);
    for (const o of refused) expect((o as PromiseRejectedResult).reason).toBeInstanceOf(TooManyKeysError);
    expect(await active(accountId)).toBe(20);
  }, 60_000);

  it("gives a session's notice to one read only, and none past its time or without the session", async () => {
    const { accountId } = await account(0n);
    const sessionHash = randomBytes(32).toString('hex');
    const seconds = Math.floor(Date.now() / 1000);
    await store.putSession({
      sessionHash,
      accountId,
      subject: 'contract',
      createdAt: now(),
      expiresAt: seconds + 600,
    });
    const notice = { created: { name: 'laptop', key: 'svc_live_x' }, until: seconds + 60 };
    await store.setSessionNotice(sessionHash, notice);
    const reads = await Promise.all([
      store.takeSessionNotice(sessionHash, seconds),
      store.takeSessionNotice(sessionHash, seconds),
    ]);
    expect(reads.filter((read) => read !== undefined)).toEqual([notice]);
    expect(await store.takeSessionNotice(sessionHash, seconds)).toBeUndefined();
    await store.setSessionNotice(sessionHash, { changedKeyHash: 'h', until: seconds + 60 });
    expect(await store.takeSessionNotice(sessionHash, seconds + 61)).toBeUndefined();
    expect(await store.takeSessionNotice(sessionHash, seconds)).toBeUndefined();
    await store.deleteSession(sessionHash);
    await store.setSessionNotice(sessionHash, notice);
    expect(await store.takeSessionNotice(sessionHash, seconds)).toBeUndefined();
    expect(await store.getSession(sessionHash, seconds)).toBeUndefined();
  });

  it("remembers an account's Stripe Customer: the first remembered wins, even among writes at once", async () => {
    const { accountId } = await account(0n);
    const other = (await account(0n)).accountId;
    expect(await store.billingCustomerOf(accountId)).toBeUndefined();
    expect(await store.rememberBillingCustomer(accountId, 'cus_first', now())).toBe('cus_first');
    expect(await store.rememberBillingCustomer(accountId, 'cus_second', now())).toBe('cus_first');
    expect(await store.rememberBillingCustomer(accountId, 'cus_first', now())).toBe('cus_first');
    expect(await store.billingCustomerOf(accountId)).toBe('cus_first');
    // Another account's is its own.
    expect(await store.billingCustomerOf(other)).toBeUndefined();
    const racing = await Promise.all(
      ['cus_a', 'cus_b', 'cus_c', 'cus_d'].map((c) => store.rememberBillingCustomer(other, c, now())),
    );
    const winner = racing[0] as string;
    expect(['cus_a', 'cus_b', 'cus_c', 'cus_d']).toContain(winner);
    expect(racing).toEqual([winner, winner, winner, winner]);
    expect(await store.billingCustomerOf(other)).toBe(winner);
    expect(await store.billingCustomerOf(accountId)).toBe('cus_first');
  });

  it('replaces a remembered Customer only while it is the one found gone, once among replacements at once', async () => {
    const { accountId } = await account(0n);
    await store.rememberBillingCustomer(accountId, 'cus_old', now());
    // Replacing a Customer that is not (or no longer) the one remembered: nothing written.
    expect(await store.rememberBillingCustomer(accountId, 'cus_x', now(), { replacing: 'cus_gone' })).toBe(
      'cus_old',
    );
    expect(await store.billingCustomerOf(accountId)).toBe('cus_old');
    expect(await store.rememberBillingCustomer(accountId, 'cus_new', now(), { replacing: 'cus_old' })).toBe(
      'cus_new',
    );
    expect(await store.billingCustomerOf(accountId)).toBe('cus_new');
    // The old one found gone again by a page that read before the replacement: the new one stands.
    expect(await store.rememberBillingCustomer(accountId, 'cus_late', now(), { replacing: 'cus_old' })).toBe(
      'cus_new',
    );
    const racing = await Promise.all(
      ['cus_p', 'cus_q', 'cus_r'].map((c) =>
        store.rememberBillingCustomer(accountId, c, now(), { replacing: 'cus_new' }),
      ),
    );
    const winner = racing[0] as string;
    expect(['cus_p', 'cus_q', 'cus_r']).toContain(winner);
    expect(racing).toEqual([winner, winner, winner]);
    expect(await store.billingCustomerOf(accountId)).toBe(winner);
    // A replacement where none is remembered (say, an item deleted by hand) is written.
    const { accountId: fresh } = await account(0n);
    expect(await store.rememberBillingCustomer(fresh, 'cus_y', now(), { replacing: 'cus_z' })).toBe('cus_y');
    expect(await store.billingCustomerOf(fresh)).toBe('cus_y');
  });

  it('adds a top-up once per reference, and refuses one for an unknown account', async () => {
    const { accountId } = await account(0n);
    expect(await store.topUp(accountId, 'pay-1', 700n, now())).toBe(true);
    expect(await store.topUp(accountId, 'pay-1', 700n, now())).toBe(false);
    expect((await store.getAccount(accountId))?.balanceNano).toBe(700n);
    await expect(store.topUp('no-such-account', 'pay-1', 1n, now())).rejects.toBeInstanceOf(
      AccountNotFoundError,
    );
  });

  it('settles a charge once by its generation id, entry and deduction together', async () => {
    const { accountId, keyId } = await account(10_000n);
    const entry = charge(accountId, keyId, 1_300n);
    expect(await store.settleCharge(entry)).toBe('settled');
    // Settled again within the ten minutes DynamoDB answers a repeated transaction (same
    // ClientRequestToken, same payload) as its commit: charged once, and 'settled' only for the call
    // whose write made the entry, so that no second writer counts it billed.
    expect(await store.settleCharge(entry)).toBe('already-settled');
    expect((await store.getAccount(accountId))?.balanceNano).toBe(8_700n);
    expect(await store.getLedgerEntry(accountId, entry.generationId)).toMatchObject({
      entryId: entry.generationId,
      type: 'charge',
      deltaNano: -1_300n,
      keyId,
      tier: 'svc-fast',
      promptTokens: 10,
      completionTokens: 5,
      cachedTokens: 0,
      estimated: false,
    });
    expect(await store.getLedgerEntry(accountId, newGenerationId())).toBeUndefined();
    await expect(store.settleCharge(charge('no-such-account', keyId, 1n))).rejects.toBeInstanceOf(
      AccountNotFoundError,
    );
  });

  it('places a hold only while credit is available, and releases it with the settlement', async () => {
    const { accountId, keyId } = await account(1_000n);
    const first = hold(accountId, 900n);
    expect(await store.placeHold(first)).toBe('held');
    expect((await store.getAccount(accountId))?.heldNano).toBe(900n);
    // 100 still available: one more is admitted, then none.
    const second = hold(accountId, 900n);
    expect(await store.placeHold(second)).toBe('held');
    expect(await store.placeHold(hold(accountId, 1n))).toBe('refused');
    const entry = { ...charge(accountId, keyId, 400n), generationId: first.holdId };
    expect(await store.settleCharge(entry, { hold: first })).toBe('settled');
    expect(await store.getAccount(accountId)).toMatchObject({ balanceNano: 600n, heldNano: 900n });
    expect((await store.listHolds(accountId)).map((h) => h.holdId)).toEqual([second.holdId]);
    expect(await store.releaseHold(second)).toBe(true);
    expect(await store.releaseHold(second)).toBe(false);
    expect(await store.getAccount(accountId)).toMatchObject({ balanceNano: 600n, heldNano: 0n });
  });

  it('says why a hold is refused: the account is suspended', async () => {
    const { accountId } = await account(1_000n);
    await store.setAccountStatus(accountId, 'suspended', now());
    expect(await store.placeHold(hold(accountId, 1n))).toBe('suspended');
  });

  it('releases a hold for expiry only once it has expired', async () => {
    const { accountId } = await account(1_000n);
    const expiring = hold(accountId, 100n, Date.now() + 10_000);
    expect(await store.placeHold(expiring)).toBe('held');
    expect(await store.releaseHold(expiring, { onlyIfExpiredAt: Date.now() })).toBe(false);
    expect(await store.releaseHold(expiring, { onlyIfExpiredAt: Date.now() + 20_000 })).toBe(true);
    expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
  });

  it('keeps a usage record on a live hold only', async () => {
    const { accountId } = await account(1_000n);
    const live = hold(accountId, 100n);
    expect(await store.placeHold(live)).toBe('held');
    expect(await store.recordUsageOnHold(live, '{"a":1}')).toBe(true);
    expect((await store.listHolds(accountId))[0]?.usageRecord).toBe('{"a":1}');
    expect(await store.releaseHold(live)).toBe(true);
    expect(await store.recordUsageOnHold(live, '{"a":2}')).toBe(false);
  });

  it('defers a settlement onto an item of amount 0, unless the generation is already billed', async () => {
    const { accountId, keyId } = await account(1_000n);
    const entry = charge(accountId, keyId, 100n);
    expect(await store.deferSettlement(entry, '{"record":1}')).toBe('deferred');
    const [deferred] = await store.listHolds(accountId);
    expect(deferred).toMatchObject({
      accountId,
      holdId: entry.generationId,
      amountNano: 0n,
      usageRecord: '{"record":1}',
      deferred: true,
    });
    expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
    const billed = charge(accountId, keyId, 100n);
    expect(await store.settleCharge(billed)).toBe('settled');
    expect(await store.deferSettlement(billed, '{}')).toBe('already-settled');
  });

  it('lists holds by expiry, soonest first', async () => {
    const { accountId } = await account(10_000n);
    const later = hold(accountId, 1n, Date.now() + 50_000);
    const sooner = hold(accountId, 1n, Date.now() + 10_000);
    expect(await store.placeHold(later)).toBe('held');
    expect(await store.placeHold(sooner)).toBe('held');
    expect((await store.listHolds(accountId)).map((h) => h.holdId)).toEqual([sooner.holdId, later.holdId]);
  });

  it('counts the accounts below zero', async () => {
    const before = await store.countNegativeBalances();
    const { accountId, keyId } = await account(100n);
    expect(await store.settleCharge(charge(accountId, keyId, 150n))).toBe('settled');
    expect(await store.countNegativeBalances()).toBe(before + 1);
  });

  it("keeps each key's usage, once per generation, over every slice, and reads a key by its hash", async () => {
    const { accountId, keyHash, keyId } = await account(10_000n);
    const other = await keyFor(store, accountId, 'other');
    await store.splitAccount(accountId, 4);
    const onSlice = (key: string, billed: bigint, slice: number) =>
      charge(accountId, key, billed, {
        generationId: newGenerationId(Date.now(), slice),
        ...(slice ? { slice } : {}),
      });
    const first = onSlice(keyId, 1_300n, 0);
    expect(await store.settleCharge(first)).toBe('settled');
    expect(await store.settleCharge(onSlice(keyId, 200n, 2))).toBe('settled');
    expect(await store.settleCharge(onSlice(other.keyId, 70n, 3))).toBe('settled');
    // The first again, with a hold (another request): the ledger's condition refuses it, uncounted.
    expect(await store.settleCharge(first, { hold: hold(accountId, 0n) })).toBe('already-settled');
    expect(await store.keyUsage(accountId, keyId)).toBe(1_500n);
    expect(await store.keyUsage(accountId, other.keyId)).toBe(70n);
    expect(await store.keyUsage(accountId, generateApiKey().keyId)).toBe(0n);
    expect(await store.getKey(keyHash)).toMatchObject({
      keyId,
      accountId,
      name: 'test',
      status: 'active',
    });
    expect(await store.getKey(generateApiKey().keyHash)).toBeUndefined();
  });

  it("reads several keys' spend of one day together, summed over every slice, as each alone", async () => {
    const { accountId, keyId } = await account(10_000n);
    const other = await keyFor(store, accountId, 'other');
    await store.splitAccount(accountId, 3);
    const day = '2030-02-01';
    const onSlice = (key: string, billed: bigint, slice: number, createdAt = `${day}T12:00:00.000Z`) =>
      charge(accountId, key, billed, {
        generationId: newGenerationId(Date.now(), slice),
        createdAt,
        ...(slice ? { slice } : {}),
      });
    for (const entry of [
      onSlice(keyId, 400n, 0),
      onSlice(keyId, 25n, 2),
      onSlice(other.keyId, 70n, 1),
      onSlice(other.keyId, 5n, 2),
      // Another day's spend is not this day's.
      onSlice(keyId, 1_000n, 1, '2030-01-31T23:59:59.999Z'),
    ])
      expect(await store.settleCharge(entry)).toBe('settled');
    const unknown = generateApiKey().keyId;
    const spent = await store.keysDailySpend(accountId, [keyId, other.keyId, unknown], day);
    expect(spent).toEqual(
      new Map([
        [keyId, 425n],
        [other.keyId, 75n],
        [unknown, 0n],
      ]),
    );
    for (const [id, nano] of spent) expect(await store.keyDailySpend(accountId, id, day)).toBe(nano);
    expect(await store.keysDailySpend(accountId, [], day)).toEqual(new Map());
    expect(await store.keysDailySpend('no-such-account', [keyId], day)).toEqual(new Map([[keyId, 0n]]));
  });

  it("sets and removes a key's daily cap on its own account only, and the principal carries it", async () => {
    const { accountId, keyHash, keyId } = await account(10_000n);
    const stranger = await account(10_000n);
    await expect(store.setKeyDailyCap(stranger.accountId, keyId, 5_000n)).rejects.toMatchObject({
      name: 'KeyNotFoundError',
    });
    await expect(store.setKeyDailyCap(accountId, generateApiKey().keyId, 5_000n)).rejects.toMatchObject({
      name: 'KeyNotFoundError',
    });
    expect((await store.loadPrincipal(keyHash))?.keyCap).toBeUndefined();
    expect(await store.setKeyDailyCap(accountId, keyId, 5_000n)).toMatchObject({
      keyId,
      dailyCapNano: 5_000n,
    });
    expect(await store.getKey(keyHash)).toMatchObject({ dailyCapNano: 5_000n });
    expect((await store.loadPrincipal(keyHash))?.keyCap).toMatchObject({ capNano: 5_000n, slices: 1 });
    const removed = await store.setKeyDailyCap(accountId, keyId, undefined);
    expect(removed.dailyCapNano).toBeUndefined();
    expect((await store.getKey(keyHash))?.dailyCapNano).toBeUndefined();
    expect((await store.loadPrincipal(keyHash))?.keyCap).toBeUndefined();
  });

  it("counts a key's day: every charge on its day, a capped hold until settled or released, refused at the share", async () => {
    const { accountId, keyHash, keyId } = await account(1_000_000n);
    await store.setKeyDailyCap(accountId, keyId, 1_000n);
    const day = '2030-01-01';
    const at = `${day}T10:00:00.000Z`;
    const capped = (amountNano: bigint): Hold => ({ ...hold(accountId, amountNano), createdAt: at, keyId });
    // An uncapped-style charge of another day counts on that day only.
    await store.settleCharge(charge(accountId, keyId, 50n, { createdAt: '2029-12-31T23:59:59.999Z' }));
    expect(await store.keyDailySpend(accountId, keyId, '2029-12-31')).toBe(50n);
    const first = capped(700n);
    expect(await store.placeHold(first, { capShareNano: 1_000n })).toBe('held');
    expect(await store.keyDailySpend(accountId, keyId, day)).toBe(700n);
    // Below the share: held, past it by less than this hold.
    const second = capped(400n);
    expect(await store.placeHold(second, { capShareNano: 1_000n })).toBe('held');
    expect(await store.keyDailySpend(accountId, keyId, day)).toBe(1_100n);
    expect((await store.loadPrincipal(keyHash))?.keyCap?.spentByDay[day]).toBe(1_100n);
    // At the share: refused, nothing written.
    expect(await store.placeHold(capped(1n), { capShareNano: 1_000n })).toBe('capped');
    expect(await store.keyDailySpend(accountId, keyId, day)).toBe(1_100n);
    // The settlement replaces its hold with its bill; a release takes the hold off.
    expect(
      await store.settleCharge(
        charge(accountId, keyId, 300n, { generationId: first.holdId, createdAt: at }),
        {
          hold: first,
        },
      ),
    ).toBe('settled');
    expect(await store.keyDailySpend(accountId, keyId, day)).toBe(700n);
    expect(await store.releaseHold(second)).toBe(true);
    expect(await store.keyDailySpend(accountId, keyId, day)).toBe(300n);
    expect((await store.getAccount(accountId))?.heldNano).toBe(0n);
  });

  it('sums the top-ups of an account, and no charge', async () => {
    const { accountId, keyId } = await account(5_000n);
    expect(await store.topUp(accountId, 'pay-a', 700n, now())).toBe(true);
    expect(await store.topUp(accountId, 'pay-a', 700n, now())).toBe(false);
    expect(await store.settleCharge(charge(accountId, keyId, 300n))).toBe('settled');
    expect(await store.totalCredits(accountId)).toBe(5_700n);
    expect(await store.totalCredits((await account(0n)).accountId)).toBe(0n);
  });

  it('splits an account, never into fewer slices, its total unchanged', async () => {
    const { accountId } = await account(8_000n);
    expect(await store.splitAccount(accountId, 4)).toBe(4);
    expect(await store.splitAccount(accountId, 2)).toBe(4);
    expect(await store.getAccount(accountId)).toMatchObject({ balanceNano: 8_000n, slices: 4 });
    await expect(store.splitAccount('no-such-account', 2)).rejects.toBeInstanceOf(AccountNotFoundError);
  });

  it('changes a status with a cause once per cause, only on an active account, every slice too', async () => {
    const { accountId } = await account(8_000n);
    await store.splitAccount(accountId, 3);
    const suspend = (cause: string) => store.setAccountStatus(accountId, 'suspended', now(), { cause });
    expect(await suspend('stripe:dispute:dp_1')).toBe(true);
    expect((await store.getAccount(accountId))?.status).toBe('suspended');
    await store.setAccountStatus(accountId, 'active', now());
    expect(await suspend('stripe:dispute:dp_1')).toBe(false);
    expect((await store.getAccount(accountId))?.status).toBe('active');
    await store.setAccountStatus(accountId, 'banned', now());
    expect(await suspend('stripe:dispute:dp_2')).toBe(false);
    expect((await store.getAccount(accountId))?.status).toBe('banned');
    await store.setAccountStatus(accountId, 'active', now());
    expect(await suspend('stripe:dispute:dp_2')).toBe(true);
    expect((await store.getAccount(accountId))?.status).toBe('suspended');
    await expect(suspend('x')).resolves.toBe(false);
    await expect(
      store.setAccountStatus('no-such-account', 'suspended', now(), { cause: 'x' }),
    ).rejects.toBeInstanceOf(AccountNotFoundError);
  });
});

describe('the DynamoDB store', () => {
  it('counts the active keys of an account made before counts were kept, also under 30 creates at once', async () => {
    const store = new DynamoStore(client, tables);
    const accountId = `contract-legacy-${randomBytes(4).toString('hex')}`;
    await store.createAccount(accountId, 0n, now());
    for (let i = 0; i < 12; i++) await keyFor(store, accountId);
    const [revoked] = await store.listKeys(accountId);
    await store.revokeKey(revoked?.keyHash as string, now());
    // As an account item written before the count existed: no `activeKeys`.
    await client.send(
      new UpdateItemCommand({
        TableName: tables.accounts,
        Key: { accountId: { S: accountId } },
        UpdateExpression: 'REMOVE activeKeys',
      }),
    );
    const outcomes = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => keyFor(store, accountId, `new ${i}`, { maxActive: 20 })),
    );
    const refused = outcomes.filter((o) => o.status === 'rejected');
    expect(outcomes.length - refused.length).toBe(9);
    for (const o of refused) expect((o as PromiseRejectedResult).reason).toBeInstanceOf(TooManyKeysError);
    const keys = await store.listKeys(accountId);
    expect(keys.filter((k) => k.status === 'active')).toHaveLength(20);
  }, 60_000);

  it("reads any number of keys' spend of a day in the calls it makes for one key", async () => {
    const store = new DynamoStore(client, tables);
    const made = await accountWith(store, '1', `contract-calls-${randomBytes(4).toString('hex')}`);
    await store.splitAccount(made.accountId, 3);
    const calls = async (read: () => Promise<unknown>) => {
      const seen: string[] = [];
      const stop = watchDynamoCalls((call) => seen.push(call));
      try {
        await read();
      } finally {
        stop();
      }
      return seen;
    };
    const keyIds = Array.from({ length: 20 }, () => generateApiKey().keyId);
    const one = await calls(() => store.keyDailySpend(made.accountId, made.keyId, '2030-02-01'));
    expect(one).toEqual(['dynamodb:GetItem', 'dynamodb:BatchGetItem']);
    expect(await calls(() => store.keysDailySpend(made.accountId, keyIds, '2030-02-01'))).toEqual(one);
  });
});
