import { readdirSync, readlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usdToNano } from '../../functions/billing/money.js';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { getAccount } from '../../lib/admin/operations.js';
import { billLoggedGenerations } from '../../lib/admin/usage-records.js';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import { bundleFunctions, ricLauncher, runtimeInstalled } from '../../lib/local/aws-lambda-ric.js';
import { type RunningDynamo, startDynamoLocal } from '../../lib/local/dynamodb-local.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { ledgerOf } from '../support/settled.js';
import { eventually } from '../support/sse.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * No generation leaves no trace: the completions bundle, under AWS's runtime client on Node 22, is
 * killed (SIGKILL) after its reply went out and before its settlement reached the database. Its
 * logged usage record is then billed by `admin bill-logged`'s operation, once.
 *
 * The functions reach DynamoDB Local through a TCP proxy the test controls: once the upstream has
 * answered, the proxy holds what the function sends, so the settlement write never arrives (a paused
 * database would still apply it when resumed, from its socket buffer).
 */
const RIC = runtimeInstalled();
let dynamo: RunningDynamo;
let proxy: HoldingProxy;
let upstream: FakeUpstream;
let target: Target | undefined;
let bundleDir = '';
let logs = '';

interface HoldingProxy {
  endpoint: string;
  /** From now on, bytes from clients are kept back, never forwarded. */
  hold(): void;
  /** Bytes kept back so far. */
  held(): number;
  /** Drops every connection (and what was held), and forwards again. */
  reset(): void;
  server: Server;
}

async function holdingProxy(to: string): Promise<HoldingProxy> {
  const { hostname, port } = new URL(to);
  let holding = false;
  let heldBytes = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const backend = createConnection({ host: hostname, port: Number(port) });
    sockets.add(client).add(backend);
    client.on('data', (data) => {
      if (holding) heldBytes += data.byteLength;
      else backend.write(data);
    });
    backend.on('data', (data) => client.write(data));
    const close = () => {
      client.destroy();
      backend.destroy();
      sockets.delete(client);
      sockets.delete(backend);
    };
    client.on('close', close).on('error', close);
    backend.on('close', close).on('error', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    hold: () => {
      holding = true;
    },
    held: () => heldBytes,
    reset: () => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      holding = false;
    },
    server,
  };
}

const REPLY = 'A reply whose settlement never reached the ledger.';

beforeAll(async () => {
  if (!RIC) {
    if (process.env.CI === 'true') throw new Error('aws-lambda-ric is not installed; .ci/run installs it');
    return;
  }
  dynamo = await startDynamoLocal();
  proxy = await holdingProxy(dynamo.endpoint);
  upstream = await startFakeUpstream((_body, res) => {
    // The auth read and the hold are done: whatever the function sends the database now is held.
    proxy.hold();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'up-1',
        object: 'chat.completion',
        created: 1,
        model: 'fake',
        choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 12, completion_tokens: 10, total_tokens: 22 },
      }),
    );
  });
  const bundles = await bundleFunctions('.cache/recovery-bundles');
  bundleDir = join(REPO_ROOT, '.cache/recovery-bundles/completions');
  const tiers = Object.fromEntries(
    (['svc-fast', 'svc-pro', 'svc-heavy'] as const).map((tier) => [
      tier,
      [{ baseUrl: upstream.url, model: 'fake', prices: SIMULATOR_PRICES[tier] }],
    ]),
  );
  target = await startTarget({
    dynamoEndpoint: proxy.endpoint,
    launcher: ricLauncher(bundles, (text) => {
      logs += text;
    }),
    env: { TIERS_CONFIG: JSON.stringify(tiers), LOG_LEVEL: 'INFO' },
  });
}, 180_000);

afterAll(async () => {
  await target?.stop();
  proxy?.reset();
  proxy?.server.close();
  await upstream?.close();
  await dynamo?.stop();
  if (!RIC) console.info('unsettled-recovery: aws-lambda-ric is not installed; skipped');
});

/** The pids of the processes running the completions bundle. */
function completionsPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`) === bundleDir;
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('a function killed between its reply and its settlement', () => {
  it('leaves its usage record in the log, which admin bill-logged bills once', async (context) => {
    if (!target) return context.skip();
    // Funded so that the request holds (the hold is part of the record, and released by the bill).
    const { accountId, key } = await newAccount(target, '1');
    const before = await getAccount(target.admin, accountId);
    const response = await fetch(`${target.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] }),
    });
    // The reply does not wait for the ledger: it arrives while the settlement is held.
    expect(response.status).toBe(200);
    const reply = (await response.json()) as { id: string; usage: { cost: number } };
    await eventually(async () => (logs.includes(reply.id) && proxy.held() > 0 ? true : undefined));
    for (const pid of completionsPids()) process.kill(pid, 'SIGKILL');
    proxy.reset();

    // Nothing billed, the credit still held.
    expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
    const after = await getAccount(target.admin, accountId);
    expect(after?.balanceNano).toBe(before?.balanceNano);

    const first = await billLoggedGenerations(target.admin.store, logs);
    expect(first.settled).toEqual([reply.id]);
    const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
    expect(charges.map((c) => [c.entryId, -c.deltaNano])).toEqual([
      [reply.id, usdToNano(String(reply.usage.cost))],
    ]);
    const billed = await getAccount(target.admin, accountId);
    expect(billed?.balanceNano).toBe((before?.balanceNano ?? 0n) - usdToNano(String(reply.usage.cost)));
    expect(billed?.heldNano).toBe(0n);

    const second = await billLoggedGenerations(target.admin.store, logs);
    expect(second).toEqual({ settled: [], alreadySettled: [reply.id], invalid: 0 });
    expect((await getAccount(target.admin, accountId))?.balanceNano).toBe(billed?.balanceNano);
  }, 120_000);
});
