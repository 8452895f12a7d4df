/**
 * The request path's one read, two ways side by side (issue 15): the SDK client's BatchGetItemCommand
 * and the adapter's direct signed call (functions/adapters/dynamodb/wire.ts), against DynamoDB Local
 * on Node 22 (re-run under it when scripts/install-lambda-runtime.sh has installed it). CPU per call
 * from process.cpuUsage(), back to back and with 20 ms idle between calls (as an instance between
 * invocations, when caches are cold). `npx tsx bench/dynamodb-read.ts`
 */
import { spawnSync } from 'node:child_process';
import { BatchGetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoStore } from '../functions/adapters/dynamodb/index.js';
import { DynamoWire } from '../functions/adapters/dynamodb/wire.js';
import { hashKey } from '../functions/core/auth.js';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { NODE22, runtimeInstalled } from '../lib/local/aws-lambda-ric.js';
import { ensureTables, localClient, startDynamoLocal } from '../lib/local/dynamodb-local.js';
import { localTableNames } from '../lib/local/stack.js';

if (!process.version.startsWith('v22') && runtimeInstalled()) {
  const run = spawnSync(NODE22, ['--import', 'tsx', ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}

const CALLS = 2_000;
const PACED_CALLS = 300;
const dynamo = await startDynamoLocal();
try {
  const client = localClient(dynamo.endpoint);
  const tables = localTableNames();
  await ensureTables(client, tables);
  await createAccount({ store: new DynamoStore(client, tables) }, 'bench', '100');
  const { key } = await createKey({ store: new DynamoStore(client, tables) }, 'bench', 'bench');
  const input = {
    RequestItems: {
      [tables.keys]: { Keys: [{ keyHash: { S: hashKey(key) } }], ConsistentRead: true },
      [tables.accounts]: { Keys: [{ accountId: { S: 'bench' } }], ConsistentRead: true },
    },
  };
  const wire = new DynamoWire(client, { connectTimeoutMs: 5_000, requestTimeoutMs: 5_000, maxAttempts: 3 });
  const ways: Record<string, () => Promise<{ Responses?: object }>> = {
    'SDK client (BatchGetItemCommand)': async () =>
      (await client.send(new BatchGetItemCommand(input))) as { Responses?: object },
    'direct signed call (wire.ts)': () => wire.call<{ Responses?: object }>('BatchGetItem', input),
  };
  const measure = async (call: () => Promise<{ Responses?: object }>, calls: number, gapMs: number) => {
    let cpu = 0;
    for (let i = 0; i < calls; i++) {
      if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
      const start = process.cpuUsage();
      const out = await call();
      if (!out.Responses) throw new Error('no Responses');
      const used = process.cpuUsage(start);
      cpu += used.user + used.system;
    }
    return cpu / calls;
  };
  console.log(
    `Node ${process.version}, DynamoDB Local; CPU of this process per call, microseconds (median of 3 rounds).`,
  );
  console.log('');
  console.log('| call | back to back | 20 ms apart |');
  console.log('|---|---|---|');
  for (const call of Object.values(ways)) await measure(call, 300, 0); // warm both
  for (const [name, call] of Object.entries(ways)) {
    const unpaced: number[] = [];
    const paced: number[] = [];
    for (let round = 0; round < 3; round++) {
      unpaced.push(await measure(call, CALLS, 0));
      paced.push(await measure(call, PACED_CALLS, 20));
    }
    const median = (values: number[]) => values.sort((a, b) => a - b)[1]?.toFixed(0);
    console.log(`| ${name} | ${median(unpaced)} | ${median(paced)} |`);
  }
} finally {
  await dynamo.stop();
}
