/**
 * The balance watch on the accounts table's stream, on the local stack (DynamoDB Local's stream read
 * through the Streams API with the watch's role, held by the IAM layer to its synthesized policy; the
 * event source mapping's own filters; the watch's code): no run of the sweep anywhere in this file.
 * Settlements crossing an alert threshold send exactly one e-mail, and crossing auto top-up's level
 * start exactly one PaymentIntent, credited once; settlements that cross nothing invoke nothing;
 * changing the settings copies the levels onto the account item and every slice item (a split after
 * copies them onto its new slices), and removing them removes the copy.
 */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { sliceKey } from '../../functions/adapters/dynamodb/items.js';
import { WatchItems } from '../../functions/adapters/dynamodb/watch.js';
import type { ChargeEntry } from '../../functions/core/store.js';
import { createSaveCardCheckout } from '../../functions/payments/checkout.js';
import { stripeApi, stripeClient } from '../../functions/payments/stripe-api.js';
import type { LocalStack } from '../../lib/local/stack.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

const CENT = 10_000_000n;
let target: Target;
let local: LocalStack;
let store: DynamoStore;
let watches: WatchItems;

beforeAll(async () => {
  target = await startTarget({ watchStream: true });
  local = target.local as LocalStack;
  store = target.admin.store as DynamoStore;
  watches = new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
}, 120_000);

afterAll(async () => {
  await target?.stop();
});

let generation = 0;
/** `count` settlements of `cents` each, all at once, as the completions function writes them. */
async function settleAtOnce(accountId: string, count: number, cents: number): Promise<void> {
  const settler = local.storeAs('completions');
  await Promise.all(
    Array.from({ length: count }, () => {
      generation += 1;
      const entry: ChargeEntry = {
        accountId,
        generationId: `gen-stream-${Date.now().toString(36)}-${generation}`,
        keyId: 'key_stream',
        tier: 'svc-fast',
        upstreamModel: 'sim',
        promptTokens: 1,
        completionTokens: 1,
        cachedTokens: 0,
        upstreamCostUsd: '0',
        billedNano: BigInt(cents) * CENT,
        estimated: false,
        createdAt: new Date().toISOString(),
      };
      return settler.settleCharge(entry);
    }),
  );
}

const now = () => new Date().toISOString();
const addressOf = (accountId: string) => `stream-${accountId}@example.com`;
const mailTo = (accountId: string) => local.ses.messages.filter((m) => m.to.includes(addressOf(accountId)));
const balance = async (accountId: string) => (await store.getAccount(accountId))?.balanceNano;
const item = async (accountId: string, slice = 0) =>
  (
    await store.client.send(
      new GetItemCommand({
        TableName: store.tables.accounts,
        Key: { accountId: { S: sliceKey(accountId, slice) } },
        ConsistentRead: true,
      }),
    )
  ).Item;
const intentsOf = (accountId: string) =>
  [...local.stripe.stripe.paymentIntents.values()].filter(
    (pi) =>
      (pi.metadata as Record<string, string>).accountId === accountId &&
      (pi.metadata as Record<string, string>).kind === 'auto_top_up',
  );

describe('low-balance alert from the stream', () => {
  it('200 settlements crossing at once: one e-mail; more below: none; a top-up above and a second crossing: a second', async () => {
    const { accountId } = await newAccount(target, '10');
    await watches.setAlert(accountId, 500, addressOf(accountId), now());
    await local.watchStream.idle();
    expect(mailTo(accountId)).toEqual([]);

    await settleAtOnce(accountId, 200, 3);
    await local.watchStream.idle();
    expect(mailTo(accountId)).toHaveLength(1);
    // The balance the watch read when the stream brought the crossing: below the $5.00 set, and at
    // least the $4.00 all 200 settlements leave (the batch may be read before the last of them).
    const told = /is \$(\d+\.\d+)/.exec(mailTo(accountId)[0]?.text ?? '')?.[1];
    expect(Number(told)).toBeLessThan(5);
    expect(Number(told)).toBeGreaterThanOrEqual(4);
    await settleAtOnce(accountId, 20, 1);
    await local.watchStream.idle();
    expect(mailTo(accountId)).toHaveLength(1);

    await store.topUp(accountId, 'manual-stream', 1_000n * CENT, now());
    await local.watchStream.idle();
    expect((await watches.getWatch(accountId))?.alertState).toBe('armed');
    await settleAtOnce(accountId, 200, 5);
    await local.watchStream.idle();
    expect(mailTo(accountId)).toHaveLength(2);
    expect(local.iam.denials()).toEqual([]);
  }, 90_000);

  it('settlements that keep the balance above every level reach the watch not at all', async () => {
    const { accountId } = await newAccount(target, '10');
    await watches.setAlert(accountId, 100, addressOf(accountId), now());
    await local.watchStream.idle();
    const before = local.watchStream.counts();
    await settleAtOnce(accountId, 50, 3);
    await local.watchStream.idle();
    const after = local.watchStream.counts();
    expect(after.read - before.read).toBeGreaterThanOrEqual(50);
    expect(after.records - before.records).toBe(0);
    expect(after.invocations - before.invocations).toBe(0);
    expect(mailTo(accountId)).toEqual([]);
    expect(await balance(accountId)).toBe(850n * CENT);
  }, 90_000);
});

describe('auto top-up from the stream', () => {
  it('200 settlements crossing X: one PaymentIntent, Y credited once', async () => {
    const { accountId } = await newAccount(target, '10');
    const api = stripeApi(stripeClient({ apiKey: local.stripe.apiKey, apiBase: local.stripe.url }));
    const session = await createSaveCardCheckout(api, {
      accountId,
      amountCents: 2_000,
      successUrl: 'http://127.0.0.1/billing?session={CHECKOUT_SESSION_ID}',
      cancelUrl: 'http://127.0.0.1/billing',
    });
    await local.stripe.stripe.pay(session.id);
    await local.stripe.stripe.idle();
    await watches.setAutoTopUp(
      accountId,
      { belowCents: 800, buyCents: 2_000, enabled: true },
      addressOf(accountId),
      now(),
    );
    await local.watchStream.idle();
    expect(intentsOf(accountId)).toEqual([]);

    await settleAtOnce(accountId, 200, 12);
    await local.watchStream.idle();
    await local.stripe.stripe.idle();
    await local.watchStream.idle();
    expect(intentsOf(accountId)).toHaveLength(1);
    expect(await balance(accountId)).toBe(2_600n * CENT);
    expect((await watches.getWatch(accountId))?.inFlight).toBeUndefined();
    expect(local.iam.denials()).toEqual([]);
  }, 90_000);
});

describe("the watch's role", () => {
  it('read the stream with exactly the three reads the stack grants, on the accounts table’s stream', () => {
    const reads = local.iam
      .allowed()
      .filter((p) => p.principal === 'balanceWatch' && p.resource.includes('/stream/'))
      .map(
        (p) =>
          `${p.action} ${p.resource.replace(/^arn:aws:dynamodb:[^:]+:\d+:table\/HostedModelApi-sandbox-/, '')}`,
      )
      .map((p) => p.replace(/\/stream\/.+$/, '/stream/<label>'))
      .sort();
    expect(reads).toEqual([
      'dynamodb:DescribeStream accounts/stream/<label>',
      'dynamodb:GetRecords accounts/stream/<label>',
      'dynamodb:GetShardIterator accounts/stream/<label>',
    ]);
  });
});

describe('the levels copied onto the account items', () => {
  it('onto the account item and each slice, onto a split’s new slices, and removed with the settings', async () => {
    const { accountId } = await newAccount(target, '10');
    await store.splitAccount(accountId, 2);
    await watches.setAlert(accountId, 500, addressOf(accountId), now());
    for (const slice of [0, 1])
      expect(await item(accountId, slice), `slice ${slice}`).toMatchObject({
        watchNano: { N: String(500n * CENT) },
        watchAlertNano: { N: String(500n * CENT) },
      });
    const head = await item(accountId, 0);
    expect(BigInt(String(head?.watchMargin?.N))).toBe(BigInt(String(head?.creditBalance?.N)) - 500n * CENT);

    await watches.setAutoTopUp(
      accountId,
      { belowCents: 900, buyCents: 1_000, enabled: true },
      undefined,
      now(),
    );
    expect(await item(accountId, 1)).toMatchObject({
      watchNano: { N: String(900n * CENT) },
      watchTopUpNano: { N: String(900n * CENT) },
    });
    await store.splitAccount(accountId, 3);
    expect(await item(accountId, 2)).toMatchObject({
      watchNano: { N: String(900n * CENT) },
      watchMargin: { N: String(-900n * CENT) },
    });

    await watches.setAutoTopUp(
      accountId,
      { belowCents: 900, buyCents: 1_000, enabled: false },
      undefined,
      now(),
    );
    await watches.setAlert(accountId, undefined, undefined, now());
    for (const slice of [0, 1, 2]) {
      const copied = await item(accountId, slice);
      expect(copied?.watchNano, `slice ${slice}`).toBeUndefined();
      expect(copied?.watchMargin).toBeUndefined();
    }
    expect(local.iam.denials()).toEqual([]);
  }, 90_000);
});
