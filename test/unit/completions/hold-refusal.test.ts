import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { complete } from '../../../functions/completions/complete.js';
import { loadCompletionsConfig } from '../../../functions/completions/config.js';
import { authorize } from '../../../functions/core/access.js';
import { usdToNano } from '../../../functions/core/money.js';
import { parseChatRequest } from '../../../functions/core/schemas.js';
import type { Hold } from '../../../functions/core/store.js';
import { startSimulator } from '../../../functions/simulator/server.js';
import { MemoryStore } from '../../support/memory-store.js';

/**
 * An account suspended (or banned) while its request is being admitted: the read saw it active and
 * funded, the hold's condition then refused it. The client is told the account's state (403), not
 * that its credit is held by requests in flight (402).
 */
let sim: Awaited<ReturnType<typeof startSimulator>>;
let config: ReturnType<typeof loadCompletionsConfig>;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
  // Ten thousand requests at once: a $100 account cannot cover them all, so a large request is held.
  config = loadCompletionsConfig({ UPSTREAM_BASE_URL: sim.url, MAX_CONCURRENCY: '10000' });
});
afterAll(async () => {
  await sim?.close();
});

describe('a hold refused because the account changed under the request', () => {
  it.each(['suspended', 'banned'] as const)(
    'is a 403 naming the account %s, on a funded account',
    async (status) => {
      const store = new MemoryStore();
      await store.createAccount('acct', usdToNano('100'), new Date().toISOString());
      store.keys.set('hash', {
        keyHash: 'hash',
        keyId: 'key',
        accountId: 'acct',
        name: 'n',
        displayPrefix: 'p',
        status: 'active',
        createdAt: '',
      });
      const caller = authorize(await store.loadPrincipal('hash'), {
        requireCredit: true,
        topUpUrl: 'https://t',
      });
      // The operator's command lands between the read and the hold.
      const racing = Object.assign(Object.create(store) as MemoryStore, {
        placeHold: async (hold: Hold) => {
          await store.setAccountStatus('acct', status);
          return store.placeHold(hold);
        },
      });
      const body = JSON.stringify({
        model: 'svc-heavy',
        messages: [{ role: 'user', content: `${'word '.repeat(20_000)}[[sim:tokens=5]]` }],
      });
      const refused = await complete(
        { request: parseChatRequest(body), bodyBytes: body.length },
        { caller, requestId: 'r', remainingMs: 300_000, afterReply: () => {} },
        { store: racing, config, credential: async () => undefined },
      ).catch((error: unknown) => error);
      expect(store.calls).toContain('placeHold');
      expect(refused).toMatchObject({
        statusCode: 403,
        message: `This account is ${status}. Contact support.`,
      });
      expect(store.holds.size).toBe(0);
    },
  );
});

describe('a hold refused for credit', () => {
  it("states the account's balance over all its slices, not the balance of the slice the request drew", async () => {
    const store = new MemoryStore();
    await store.createAccount('acct', usdToNano('100'), new Date().toISOString());
    store.keys.set('hash', {
      keyHash: 'hash',
      keyId: 'key',
      accountId: 'acct',
      name: 'n',
      displayPrefix: 'p',
      status: 'active',
      createdAt: '',
    });
    // The request drew a slice with $0.001 available; the account's slices together are below zero,
    // and the slice's credit is all held by the time the hold is placed.
    const read = await store.loadPrincipal('hash');
    const caller = authorize(read && { ...read, balanceNano: usdToNano('0.001'), slice: 3 }, {
      requireCredit: true,
      topUpUrl: 'https://t',
    });
    const refusing = Object.assign(Object.create(store) as MemoryStore, {
      placeHold: async () => 'refused' as const,
      accountBalance: async () => -81_950n,
    });
    const body = JSON.stringify({
      model: 'svc-heavy',
      messages: [{ role: 'user', content: `${'word '.repeat(20_000)}[[sim:tokens=5]]` }],
    });
    const refused = await complete(
      { request: parseChatRequest(body), bodyBytes: body.length },
      { caller, requestId: 'r', remainingMs: 300_000, afterReply: () => {} },
      { store: refusing, config, credential: async () => undefined },
    ).catch((error: unknown) => error);
    expect(refused).toMatchObject({ statusCode: 402 });
    expect((refused as Error).message).toContain('-0.00008195 USD');
  });
});
