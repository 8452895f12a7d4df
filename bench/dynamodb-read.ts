/**
 * The request path's one read, three ways side by side: the SDK client's BatchGetItemCommand, the
 * adapter's direct signed call (functions/adapters/dynamodb/wire.ts, over its own HTTP/1.1 exchange,
 * http1.ts), and the same signed call over `node:http` with a keep-alive agent (what wire.ts used
 * before http1.ts), against DynamoDB Local on Node 22 (re-run under it when
 * scripts/install-lambda-runtime.sh has installed it). CPU per call from process.cpuUsage(), back to
 * back and with 20 ms idle between calls (as an instance between invocations, when caches are cold),
 * the ways interleaved in each of 5 rounds. `npx tsx bench/dynamodb-read.ts`
 */
import { Agent, request } from 'node:http';
import { BatchGetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SignatureV4 } from '@smithy/signature-v4';
import { DynamoStore } from '../functions/adapters/dynamodb/index.js';
import { DynamoWire } from '../functions/adapters/dynamodb/wire.js';
import { hashKey } from '../functions/core/auth.js';
import { createAccount, createKey } from '../lib/admin/operations.js';
import { ensureTables, localClient, startDynamoLocal } from '../lib/local/dynamodb-local.js';
import { localTableNames } from '../lib/local/stack.js';
import { runOnNode22 } from './on-node22.js';

runOnNode22();

const CALLS = 2_000;
const PACED_CALLS = 300;
const ROUNDS = 5;
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
    'the same signed call over node:http': overNodeHttp(client, dynamo.endpoint, input),
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
    `Node ${process.version}, DynamoDB Local; CPU of this process per call, microseconds (median of ${ROUNDS} rounds).`,
  );
  console.log('');
  console.log('| call | back to back | 20 ms apart |');
  console.log('|---|---|---|');
  for (const call of Object.values(ways)) await measure(call, 300, 0); // warm each
  const unpaced = new Map<string, number[]>();
  const paced = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, call] of Object.entries(ways)) {
      unpaced.set(name, [...(unpaced.get(name) ?? []), await measure(call, CALLS, 0)]);
      paced.set(name, [...(paced.get(name) ?? []), await measure(call, PACED_CALLS, 20)]);
    }
  }
  const median = (values: number[] = []) =>
    values.sort((a, b) => a - b)[(values.length - 1) >> 1]?.toFixed(0);
  for (const name of Object.keys(ways))
    console.log(`| ${name} | ${median(unpaced.get(name))} | ${median(paced.get(name))} |`);
} finally {
  await dynamo.stop();
}

/** The read as wire.ts made it before http1.ts: signed the same way, sent with node:http's keep-alive agent. */
function overNodeHttp(client: DynamoDBClient, endpoint: string, input: object) {
  const url = new URL(endpoint);
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const signer = new SignatureV4({
    service: 'dynamodb',
    region: client.config.region,
    credentials: client.config.credentials,
    sha256: client.config.sha256,
  });
  return async (): Promise<{ Responses?: object }> => {
    const body = JSON.stringify(input);
    const signed = await signer.sign({
      method: 'POST',
      protocol: url.protocol,
      hostname: url.hostname,
      port: Number(url.port),
      path: '/',
      query: {},
      headers: {
        host: url.host,
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'DynamoDB_20120810.BatchGetItem',
      },
      body,
    });
    const text = await new Promise<string>((resolve, reject) => {
      const call = request(
        {
          agent,
          hostname: url.hostname,
          port: url.port,
          path: '/',
          method: 'POST',
          headers: { ...signed.headers, 'content-length': String(Buffer.byteLength(body)) },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
          response.on('error', reject);
        },
      );
      call.setTimeout(5_000, () => call.destroy(new Error('no answer in time')));
      call.on('error', reject);
      call.end(body);
    });
    return JSON.parse(text) as { Responses?: object };
  };
}
