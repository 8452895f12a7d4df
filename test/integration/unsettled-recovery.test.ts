import { readdirSync, readlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENERATION_USAGE_MESSAGE } from '../../functions/billing/usage-line.js';
import { usdToNano } from '../../functions/core/money.js';
import { SIMULATOR_PRICES } from '../../functions/core/tiers.js';
import { handler as loggedUsage } from '../../functions/logged-usage/handler.js';
import { getAccount } from '../../lib/admin/operations.js';
import { billLoggedGenerations } from '../../lib/admin/usage-records.js';
import { REPO_ROOT } from '../../lib/infra/service-function.js';
import { bundleFunctions, ricLauncher, runtimeInstalled } from '../../lib/local/aws-lambda-ric.js';
import { type RunningDynamo, startDynamoLocal } from '../../lib/local/dynamodb-local.js';
import { credentialEnv } from '../../lib/local/iam.js';
import { watchDynamoCalls } from '../support/dynamo-calls.js';
import { type FakeUpstream, startFakeUpstream } from '../support/fake-upstream.js';
import { linesMatching, subscriptionEvent } from '../support/logs-subscription.js';
import { ledgerOf } from '../support/settled.js';
import { eventually } from '../support/sse.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * No generation leaves no trace: the completions bundle, under AWS's runtime client on Node 22, is
 * killed (SIGKILL) after its reply went out and before its settlement reached the database. Its
 * usage line, as CloudWatch Logs delivers it through the stack's subscription filter (the lines the
 * filter matches, packed as a subscription event), is billed once by the logged-usage function's
 * handler, its hold released; Lambda's retry of the same event bills nothing more, nor does
 * `admin bill-logged` after it. A generation its function settled is only read, never written.
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
/** Whether the proxy holds what the function sends once the upstream has answered. */
let holdAfterUpstream = false;

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
    if (holdAfterUpstream) proxy.hold();
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
  // The logged-usage handler runs in this process, as Lambda runs it: with its role's credentials,
  // which the local IAM layer holds its calls to (its store is made at its first invocation).
  Object.assign(process.env, credentialEnv('loggedUsage'));
}, 180_000);

afterAll(async () => {
  for (const name of Object.keys(credentialEnv('loggedUsage'))) delete process.env[name];
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

/** The completions function's usage lines for `generationId`, delivered as CloudWatch Logs does. */
function deliveryOf(generationId: string) {
  const lines = linesMatching(logs, GENERATION_USAGE_MESSAGE).filter((l) => l.message.includes(generationId));
  expect(lines).toHaveLength(1);
  return subscriptionEvent(lines);
}

const CONTEXT = {
  functionName: 'LoggedUsage',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:LoggedUsage',
  memoryLimitInMB: '256',
  awsRequestId: 'logged-usage-test',
} as Context;

/** The logged-usage handler on `event`, and the DynamoDB operations it called. */
async function deliver(event: ReturnType<typeof subscriptionEvent>) {
  const calls: string[] = [];
  // The local stack's sweeper runs in this process too, on its timer: its scans are not the handler's.
  const stop = watchDynamoCalls((call) => {
    if (call !== 'dynamodb:Scan') calls.push(call);
  });
  try {
    return { result: await loggedUsage(event, CONTEXT), calls };
  } finally {
    stop();
  }
}

async function complete(key: string) {
  const response = await fetch(`${target?.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }] }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { id: string; usage: { cost: number } };
}

describe('the usage line of a generation its function settled', () => {
  it('is read by the logged-usage function, which writes nothing', async (context) => {
    if (!target) return context.skip();
    const { accountId, key } = await newAccount(target, '1');
    const reply = await complete(key);
    await eventually(async () => (logs.includes(reply.id) ? true : undefined));
    expect((await ledgerOf(target, accountId)).map((e) => e.entryId)).toContain(reply.id);
    const before = await getAccount(target.admin, accountId);

    const { result, calls } = await deliver(deliveryOf(reply.id));
    expect(result).toEqual({
      billed: [],
      alreadySettled: [reply.id],
      unreadable: 0,
      refused: 0,
      unbillable: [],
    });
    expect(calls).toEqual(['dynamodb:BatchGetItem']);
    expect(await getAccount(target.admin, accountId)).toEqual(before);
  }, 60_000);
});

describe('a function killed between its reply and its settlement', () => {
  it('leaves its usage line, which the logged-usage function bills once; admin bill-logged finds it billed', async (context) => {
    if (!target) return context.skip();
    // Funded so that the request holds (the hold is part of the record, and released by the bill).
    const { accountId, key } = await newAccount(target, '1');
    const before = await getAccount(target.admin, accountId);
    holdAfterUpstream = true;
    // The reply does not wait for the ledger: it arrives while the settlement is held.
    const reply = await complete(key);
    await eventually(async () => (logs.includes(reply.id) && proxy.held() > 0 ? true : undefined));
    for (const pid of completionsPids()) process.kill(pid, 'SIGKILL');
    proxy.reset();
    holdAfterUpstream = false;

    // Nothing billed, the credit still held.
    expect((await ledgerOf(target, accountId)).filter((e) => e.type === 'charge')).toHaveLength(0);
    const after = await getAccount(target.admin, accountId);
    expect(after?.balanceNano).toBe(before?.balanceNano);
    expect(after?.heldNano).toBeGreaterThan(0n);

    // Its line is signed. Copies someone else wrote into the log group bill nothing: the record's
    // bill raised under its own signature, and the record re-addressed to another account.
    const [genuine] = linesMatching(logs, GENERATION_USAGE_MESSAGE).filter((l) =>
      l.message.includes(reply.id),
    );
    const logged = JSON.parse(genuine?.message ?? '{}') as {
      record: Record<string, unknown>;
      signature?: string;
    };
    expect(logged.signature).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const other = await newAccount(target, '1');
    const otherBefore = await getAccount(target.admin, other.accountId);
    const forged = [
      { ...logged, record: { ...logged.record, billedNano: '1000000000000000' } },
      {
        ...logged,
        record: {
          ...logged.record,
          accountId: other.accountId,
          hold: { ...(logged.record.hold as object), accountId: other.accountId },
        },
        signature: undefined,
      },
    ].map((line) => ({ message: JSON.stringify(line), timestamp: Date.now() - 60_000 }));
    const refused = await deliver(subscriptionEvent(forged));
    expect(refused.result).toEqual({
      billed: [],
      alreadySettled: [],
      unreadable: 0,
      refused: 2,
      unbillable: [],
    });
    expect(refused.calls.filter((c) => c === 'dynamodb:TransactWriteItems')).toEqual([]);
    expect(await getAccount(target.admin, other.accountId)).toEqual(otherBefore);
    expect((await ledgerOf(target, other.accountId)).filter((e) => e.type === 'charge')).toEqual([]);

    // CloudWatch Logs delivers the line: billed once, the hold released with it.
    const event = deliveryOf(reply.id);
    const first = await deliver(event);
    expect(first.result).toEqual({
      billed: [reply.id],
      alreadySettled: [],
      unreadable: 0,
      refused: 0,
      unbillable: [],
    });
    expect(first.calls.filter((c) => c === 'dynamodb:TransactWriteItems')).toHaveLength(1);
    const charges = (await ledgerOf(target, accountId)).filter((e) => e.type === 'charge');
    expect(charges.map((c) => [c.entryId, -c.deltaNano])).toEqual([
      [reply.id, usdToNano(String(reply.usage.cost))],
    ]);
    const billed = await getAccount(target.admin, accountId);
    expect(billed?.balanceNano).toBe((before?.balanceNano ?? 0n) - usdToNano(String(reply.usage.cost)));
    expect(billed?.heldNano).toBe(0n);

    // Lambda's retry of the same event: read, nothing written.
    const retry = await deliver(event);
    expect(retry.result).toEqual({
      billed: [],
      alreadySettled: [reply.id],
      unreadable: 0,
      refused: 0,
      unbillable: [],
    });
    expect(retry.calls).toEqual(['dynamodb:BatchGetItem']);

    // The operator's path over the whole log finds every generation billed.
    const operator = await billLoggedGenerations(target.admin.store, logs);
    expect(operator.settled).toEqual([]);
    expect(operator.alreadySettled).toContain(reply.id);
    expect(operator.invalid).toBe(0);
    expect(await getAccount(target.admin, accountId)).toEqual(billed);
  }, 120_000);
});
