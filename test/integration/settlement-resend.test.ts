import { randomBytes } from 'node:crypto';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';

/**
 * The direct DynamoDB calls send a request again, at once, when a kept-alive socket fails before a
 * byte of answer (wire.ts). The money case: the settlement reached DynamoDB and was committed, and
 * the socket died before its answer came back. A proxy in front of DynamoDB Local forwards the
 * settlement, swallows its answer and closes the socket: the resent settlement must find its ledger
 * entry and charge nothing more.
 */
const tables = localTableNames(`resend${randomBytes(3).toString('hex')}-`);
const dynamo = new URL(inject('dynamoEndpoint'));

interface Proxy {
  endpoint: string;
  server: Server;
  connections: number;
  settlements: number;
  /** The next settlement on a socket that has carried a call before loses its answer. */
  loseNextSettlementAnswer: boolean;
  /** The start of each answer swallowed. */
  swallowed: string[];
}

async function startProxy(): Promise<Proxy> {
  const proxy: Proxy = {
    endpoint: '',
    server: createServer(),
    connections: 0,
    settlements: 0,
    loseNextSettlementAnswer: false,
    swallowed: [],
  };
  proxy.server.on('connection', (client: Socket) => {
    proxy.connections += 1;
    const upstream = connect(Number(dynamo.port), dynamo.hostname);
    let calls = 0;
    let swallowing = false;
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      const targets = text.match(/x-amz-target: DynamoDB_\d+\.\w+/gi) ?? [];
      for (const target of targets) {
        calls += 1;
        if (!target.endsWith('TransactWriteItems')) continue;
        proxy.settlements += 1;
        if (proxy.loseNextSettlementAnswer && calls > 1) {
          proxy.loseNextSettlementAnswer = false;
          swallowing = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      // DynamoDB answers a transaction once it is committed: drop that answer and the socket with it.
      if (!swallowing) return void client.write(chunk);
      proxy.swallowed.push(chunk.toString('latin1', 0, 12));
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise<void>((done) => proxy.server.listen(0, '127.0.0.1', done));
  proxy.endpoint = `http://127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
  return proxy;
}

let proxy: Proxy;
const direct = new DynamoStore(localClient(dynamo.origin), tables);

beforeAll(async () => {
  await ensureTables(localClient(dynamo.origin), tables);
  proxy = await startProxy();
});
afterAll(async () => {
  proxy.server.close();
});

describe('a settlement whose answer is lost on a kept-alive socket', () => {
  it('is sent again at once on a new connection, and the account is charged once', async () => {
    await direct.createAccount('acct-resend', 1_000_000_000n, new Date().toISOString());
    // One attempt per call: what saves the settlement here is the exchange's own resend, not a retry.
    const proxied = new DynamoStore(localClient(proxy.endpoint), tables, {
      connectTimeoutMs: 5_000,
      requestTimeoutMs: 5_000,
      maxAttempts: 1,
    });
    // A first call leaves a kept-alive socket behind (an unknown key's read).
    expect(await proxied.loadPrincipal('0'.repeat(64))).toBeUndefined();
    expect(proxy.connections).toBe(1);
    // The agent takes a socket again a loop turn after its answer (a settlement follows a generation).
    await new Promise((ready) => setImmediate(ready));

    proxy.loseNextSettlementAnswer = true;
    const outcome = await proxied.settleCharge({
      accountId: 'acct-resend',
      generationId: 'gen-1767225600-RESENDRESENDRESEND00',
      keyId: 'key_resend',
      tier: 'svc-fast',
      upstreamModel: 'sim-fast',
      promptTokens: 10,
      completionTokens: 5,
      cachedTokens: 0,
      upstreamCostUsd: '0.0001',
      billedNano: 130_000n,
      estimated: false,
      createdAt: new Date().toISOString(),
    });

    // The first send committed (DynamoDB answered 200, which the client never read); the second, with
    // the same ClientRequestToken, is answered as that transaction's success without applying it again.
    expect(proxy.swallowed).toEqual(['HTTP/1.1 200']);
    expect(proxy.settlements).toBe(2);
    expect(proxy.connections).toBe(2);
    expect(outcome).toBe('settled');
    expect((await direct.getAccount('acct-resend'))?.balanceNano).toBe(1_000_000_000n - 130_000n);
    expect(
      (await direct.getLedgerEntry('acct-resend', 'gen-1767225600-RESENDRESENDRESEND00'))?.deltaNano,
    ).toBe(-130_000n);
  });
});
