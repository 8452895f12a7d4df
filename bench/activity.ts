/**
 * `npx tsx bench/activity.ts` (or `BENCH_ONLY=activity npm run bench`): the dashboard's pages timed on
 * the server, for a typical account and for one with BENCH_ACTIVITY_GENERATIONS generations (default
 * 1,000,000) over the last 30 UTC days, and the Activity page's totals checked against the ledger.
 *
 * - Starts its own DynamoDB Local (in memory) and creates the tables and the dashboard's table.
 * - Seeds the big account from the adapter's own settlement transaction of each charge (ledger.ts
 *   `settleInput`, built but not sent): the ledger item of its Put (items.ts `chargeItem`), written with
 *   BatchWriteItem (25 a call, BENCH_ACTIVITY_CONCURRENCY calls in flight, default 16); the ADDs of its
 *   Update summed per slice item and written at the end in one UpdateItem: `creditBalance` less the
 *   charges, `usage_<keyId>`, the day counters `d_<YYYYMMDD>_<tier>` and whatever else the settlement
 *   counts (`kc_<YYYYMMDD>_<keyId>`, the key's day counter), exactly as the settlements would have left
 *   them. Why not `store.settleCharge` for all of them: each
 *   settlement is a transaction on the one account item, so the bench sends them in order (parallel
 *   ones on one item would meet as TransactionConflicts, retried: not measured here); the sample below
 *   prints the rate this machine settles at, and what 1,000,000 would take at it.
 * - To show that the seeding writes what settlements write: BENCH_ACTIVITY_SAMPLE (default 1,000) charges
 *   settled through the real `store.settleCharge` on one account, and the same charges seeded as above
 *   on another; the two account items (but their ids) and the two sets of ledger items (but the
 *   partition key) must be equal, or the bench exits 1.
 * - The typical account (BENCH_ACTIVITY_TYPICAL generations, default 500): settled through
 *   `store.settleCharge`, as the request path does.
 * - Runs the sweeper's roll-up (functions/sweeper/sweep.ts `rollUpActivity`, what its balance check
 *   calls), so the days before today move into day items, as they would have in production.
 * - Times each page through the dashboard's Hono app in process (`app.request`): a session put in the
 *   dashboard's table through the store's `putSession`, its id sent in the session cookie, so what is
 *   timed is the server's work: the session read, every DynamoDB call of the page (over HTTP to
 *   DynamoDB Local) and the rendering, to the last byte of the body. 3 warm-ups, then 30 rounds, the
 *   pages interleaved within a round; p50 and p99 (of 30: the slowest but none).
 * - Checks the Activity page's totals (each tier's and the 30 days') against a full Query of the
 *   ledger, once, outside the timing, to the nano-dollar, and every day and tier of `dailySpend` too;
 *   exits 1 on a mismatch. Prints the Query's time: what a per-view scan would cost.
 * - Prints what the daily totals cost the settlement: the bytes of the account item with and without
 *   the counters, and the write units a settlement's transaction pays for it.
 */
import { randomBytes } from 'node:crypto';
import {
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  type QueryCommandInput,
  type TransactWriteItemsCommandInput,
  UpdateItemCommand,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { daysUpTo } from '../functions/adapters/dynamodb/activity.js';
import { DynamoStore, type TableNames } from '../functions/adapters/dynamodb/index.js';
import { chargeItem, type Item, sliceKey } from '../functions/adapters/dynamodb/items.js';
import { newGenerationId } from '../functions/core/ids.js';
import { nanoToUsd, usdToNano } from '../functions/core/money.js';
import { type ChargeEntry, type DaySpend, utcDay } from '../functions/core/store.js';
import { auditEntry } from '../functions/core/team.js';
import { TIER_IDS } from '../functions/core/tiers.js';
import { ACTIVITY_DAYS } from '../functions/dashboard/activity.js';
import { createDashboardApp } from '../functions/dashboard/app.js';
import { usd } from '../functions/dashboard/pages.js';
import { hashSessionId, SESSION_COOKIE } from '../functions/dashboard/sessions.js';
import { rollUpActivity } from '../functions/sweeper/sweep.js';
import { createKey } from '../lib/admin/operations.js';
import {
  ensureDashboardTable,
  ensureTables,
  ensureTeamTables,
  localClient,
  startDynamoLocal,
} from '../lib/local/dynamodb-local.js';
import { itemSize, writeUnits } from '../lib/local/dynamodb-units.js';
import {
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TABLE_NAMES,
  LOCAL_TEAM_TABLE_NAME,
} from '../lib/tables.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
process.env.LOG_LEVEL ??= 'SILENT';
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';

const GENERATIONS = Number(process.env.BENCH_ACTIVITY_GENERATIONS ?? 1_000_000);
const TYPICAL = Number(process.env.BENCH_ACTIVITY_TYPICAL ?? 500);
const SAMPLE = Number(process.env.BENCH_ACTIVITY_SAMPLE ?? 1_000);
const CONCURRENCY = Number(process.env.BENCH_ACTIVITY_CONCURRENCY ?? 16);
/** Slices of the big account's balance (1: the account item alone, as an account before any split). */
const SLICES = Number(process.env.BENCH_ACTIVITY_SLICES ?? 1);
const KEYS = 4;
const WARMUPS = 3;
const RUNS = 30;
const DAY_MS = 86_400_000;

const lines: string[] = [];
const say = (line = '') => {
  lines.push(line);
  console.log(line);
};
let failed = false;
const fail = (message: string) => {
  failed = true;
  say(`**MISMATCH**: ${message}`);
};

/** mulberry32: the same charges from the same seed (the sample's two accounts, and reruns). */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Per tier: its share of requests, the upstream model, and the range of a charge in nano-USD. */
const TIER_MIX: Record<string, { share: number; model: string; minNano: number; maxNano: number }> = {
  'svc-fast': { share: 0.7, model: 'sim-fast', minNano: 20_000, maxNano: 2_000_000 },
  'svc-pro': { share: 0.25, model: 'sim-pro', minNano: 200_000, maxNano: 20_000_000 },
  'svc-heavy': { share: 0.05, model: 'sim-heavy', minNano: 2_000_000, maxNano: 150_000_000 },
};

/**
 * `count` charges of the account, spread uniformly over the 30 UTC days that end with `nowMs`'s day
 * (today's up to `nowMs`), over `keyIds` and the three tiers, on `slices` slices (round robin, as
 * generation ids name them).
 */
function* charges(
  accountId: string,
  keyIds: readonly string[],
  count: number,
  nowMs: number,
  seed: number,
  slices = 1,
): Generator<ChargeEntry> {
  const next = random(seed);
  const today = utcDay(new Date(nowMs).toISOString());
  const start = Date.parse(`${daysUpTo(today, ACTIVITY_DAYS)[0]}T00:00:00Z`);
  for (let i = 0; i < count; i++) {
    const at = start + Math.floor(next() * (nowMs - start));
    const pick = next();
    const tier = pick < 0.7 ? 'svc-fast' : pick < 0.95 ? 'svc-pro' : 'svc-heavy';
    const mix = TIER_MIX[tier] ?? { share: 1, model: 'sim-fast', minNano: 1, maxNano: 2 };
    const billedNano = BigInt(mix.minNano + Math.floor(next() * (mix.maxNano - mix.minNano)));
    const slice = i % slices;
    const prompt = 50 + Math.floor(next() * 4_000);
    yield {
      accountId,
      generationId: newGenerationId(at, slice),
      keyId: keyIds[Math.floor(next() * keyIds.length)] ?? '',
      tier,
      upstreamModel: mix.model,
      promptTokens: prompt,
      completionTokens: 1 + Math.floor(next() * 1_500),
      cachedTokens: next() < 0.2 ? Math.floor(prompt / 2) : 0,
      // What the upstream cost, as its exact decimal: the billed amount is its cost x 1.3.
      upstreamCostUsd: nanoToUsd((billedNano * 10n) / 13n),
      billedNano,
      estimated: next() < 0.01,
      finishReason: next() < 0.97 ? 'stop' : 'length',
      ...(next() < 0.1 ? { user: `end-user-${Math.floor(next() * 100)}` } : {}),
      createdAt: new Date(at).toISOString(),
      ...(slice ? { slice } : {}),
    };
  }
}

/** A settlement's transaction as the adapter builds it (ledger.ts `settleInput`): without a hold, the funded fast path. */
type SettleInput = (entry: ChargeEntry, hold: undefined, call: string) => TransactWriteItemsCommandInput;

/**
 * The adapter's own settlement transaction for a charge, so the seeding writes what a settlement writes
 * whatever its Update counts (today `creditBalance`, `usage_<keyId>`, `d_<day>_<tier>`, `kc_<day>_<keyId>`):
 * the ledger item of its Put (chargeItem), and the key and ADDs of its Update. Read through the store's
 * private ledger part: the bench fails at once, naming it, if that is renamed.
 */
function settlementOf(store: DynamoStore): SettleInput {
  const ledger = (store as unknown as { ledger?: { settleInput?: SettleInput } }).ledger;
  const build = ledger?.settleInput;
  if (!ledger || typeof build !== 'function')
    throw new Error(
      "the store's ledger has no settleInput: update bench/activity.ts to the settlement's code",
    );
  return build.bind(ledger);
}

/** What the settlements' Updates add to each slice item: attribute by attribute, summed. */
class SliceSums {
  readonly byItem = new Map<string, Map<string, bigint>>();
  add(input: TransactWriteItemsCommandInput): Item {
    const [put, update] = input.TransactItems ?? [];
    const item = put?.Put?.Item;
    const u = update?.Update;
    const terms = /^ADD (.+)$/.exec(u?.UpdateExpression ?? '')?.[1];
    const key = u?.Key?.accountId?.S;
    if (!item || !u || !terms || !key || (input.TransactItems ?? []).length !== 2)
      throw new Error(`a settlement that is not a ledger Put and one ADD Update: ${JSON.stringify(input)}`);
    const sums = this.byItem.get(key) ?? new Map<string, bigint>();
    this.byItem.set(key, sums);
    for (const term of terms.split(', ')) {
      const [name, value] = term.split(' ');
      const attribute = name?.startsWith('#') ? u.ExpressionAttributeNames?.[name] : name;
      const nano = u.ExpressionAttributeValues?.[value ?? '']?.N;
      if (!attribute || nano === undefined) throw new Error(`an ADD the bench cannot read: ${term}`);
      sums.set(attribute, (sums.get(attribute) ?? 0n) + BigInt(nano));
    }
    return item;
  }
}

async function batchWrite(client: DynamoDBClient, table: string, items: Item[]): Promise<number> {
  let pending: WriteRequest[] = items.map((Item) => ({ PutRequest: { Item } }));
  let calls = 0;
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1_000, 20 * 2 ** attempt)));
    const out: BatchWriteItemCommandOutput = await client.send(
      new BatchWriteItemCommand({ RequestItems: { [table]: pending } }),
    );
    calls += 1;
    pending = out.UnprocessedItems?.[table] ?? [];
  }
  return calls;
}

/**
 * Writes the charges' ledger items (chargeItem) with BatchWriteItem, CONCURRENCY calls in flight, then
 * on each slice item what their settlements would have added (one UpdateItem of ADDs a slice).
 */
async function seed(
  client: DynamoDBClient,
  tables: TableNames,
  settlement: SettleInput,
  entries: Iterable<ChargeEntry>,
  progress?: (written: number) => void,
): Promise<{ written: number; calls: number; sums: SliceSums }> {
  const sums = new SliceSums();
  const source = entries[Symbol.iterator]();
  let written = 0;
  let calls = 0;
  const nextBatch = (): Item[] => {
    const batch: Item[] = [];
    while (batch.length < 25) {
      const step = source.next();
      if (step.done) break;
      batch.push(sums.add(settlement(step.value, undefined, 'seed')));
    }
    return batch;
  };
  const worker = async () => {
    for (let batch = nextBatch(); batch.length > 0; batch = nextBatch()) {
      calls += await batchWrite(client, tables.ledger, batch);
      const before = written;
      written += batch.length;
      if (progress && Math.floor(before / 100_000) !== Math.floor(written / 100_000)) progress(written);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { written, calls, sums };
}

/** Adds the sums to the slice items, as the settlements' own Updates would have: one UpdateItem each. */
async function applySums(client: DynamoDBClient, tables: TableNames, sums: SliceSums): Promise<void> {
  for (const [key, attributes] of sums.byItem) {
    const names: Record<string, string> = {};
    const values: Item = {};
    const adds: string[] = [];
    [...attributes].forEach(([attribute, nano], i) => {
      names[`#a${i}`] = attribute;
      values[`:v${i}`] = { N: nano.toString() };
      adds.push(`#a${i} :v${i}`);
    });
    await client.send(
      new UpdateItemCommand({
        TableName: tables.accounts,
        Key: { accountId: { S: key } },
        UpdateExpression: `ADD ${adds.join(', ')}`,
        ConditionExpression: 'attribute_exists(accountId)',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
  }
}

async function queryAllItems(
  client: DynamoDBClient,
  input: QueryCommandInput,
): Promise<{ items: Item[]; pages: number; units: number }> {
  const items: Item[] = [];
  let start: Item | undefined;
  let pages = 0;
  let units = 0;
  do {
    const out = await client.send(
      new QueryCommand({ ...input, ReturnConsumedCapacity: 'TOTAL', ExclusiveStartKey: start }),
    );
    pages += 1;
    units += out.ConsumedCapacity?.CapacityUnits ?? 0;
    for (const item of out.Items ?? []) items.push(item);
    start = out.LastEvaluatedKey;
  } while (start);
  return { items, pages, units };
}

async function getItem(client: DynamoDBClient, table: string, accountId: string): Promise<Item> {
  const out = await client.send(
    new GetItemCommand({ TableName: table, Key: { accountId: { S: accountId } }, ConsistentRead: true }),
  );
  return out.Item ?? {};
}

const canonical = (item: Item, drop: string[]) =>
  JSON.stringify(
    Object.keys(item)
      .filter((name) => !drop.includes(name))
      .sort()
      .map((name) => [name, item[name]]),
  );

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((sorted.length * p) / 100) - 1)] ?? Number.NaN;
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const ms = (value: number) => value.toFixed(1);

async function main() {
  const nowMs = Date.now();
  const fixedNow = new Date(nowMs);
  const today = utcDay(fixedNow.toISOString());
  say(
    `# Dashboard pages: server time, and Activity for an account with ${GENERATIONS.toLocaleString('en-US')} generations`,
  );
  say('');
  say(
    `Run at ${fixedNow.toISOString()} (the pages' clock is held there, so a run that crosses midnight UTC reads the same 30 days); Node ${process.version}; DynamoDB Local in memory; the dashboard's Hono app in this process.`,
  );
  say('');

  const dynamo = await startDynamoLocal();
  const client = localClient(dynamo.endpoint);
  // The local stack's table names (lib/local/stack.ts localTableNames() without a prefix), on a fresh DynamoDB Local.
  const tables: TableNames = { ...LOCAL_TABLE_NAMES };
  await ensureTables(client, tables);
  await ensureDashboardTable(client, LOCAL_DASHBOARD_TABLE_NAME);
  await ensureTeamTables(client, { team: LOCAL_TEAM_TABLE_NAME, audit: LOCAL_AUDIT_TABLE_NAME });
  // The store's timeouts as the local stack has them (timeouts.ts: 5 s an attempt against DynamoDB Local,
  // 1 s against DynamoDB), read when the store is made.
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  const store = new DynamoStore(client, tables);
  const admin = { store };
  const settlement = settlementOf(store);

  const newAccount = async (accountId: string, usdCredit: string, keys: number) => {
    await store.createAccount(accountId, usdToNano(usdCredit), fixedNow.toISOString());
    const keyIds: string[] = [];
    for (let i = 0; i < keys; i++) keyIds.push((await createKey(admin, accountId, `key ${i + 1}`)).keyId);
    // A few purchases: the Billing page's history.
    for (let i = 0; i < 5; i++)
      await store.topUp(
        accountId,
        `stripe:pi_bench${randomBytes(6).toString('hex')}`,
        usdToNano('100'),
        new Date(nowMs - (i + 1) * 5 * DAY_MS).toISOString(),
      );
    return keyIds;
  };

  // 1. The seeding writes what settlements write: a sample both ways, compared item for item.
  say('## Seeding against settling');
  say('');
  const settledId = 'bench-sample-settled';
  const seededId = 'bench-sample-seeded';
  const sampleKeys = await newAccount(settledId, '100000', KEYS);
  await store.createAccount(seededId, usdToNano('100000'), fixedNow.toISOString());
  // The same balance before: the settled account's top-ups, as one update.
  const settledBefore = await getItem(client, tables.accounts, settledId);
  await client.send(
    new UpdateItemCommand({
      TableName: tables.accounts,
      Key: { accountId: { S: seededId } },
      UpdateExpression: 'SET creditBalance = :b',
      ExpressionAttributeValues: { ':b': settledBefore.creditBalance ?? { N: '0' } },
    }),
  );
  const sample = [...charges(settledId, sampleKeys, SAMPLE, nowMs, 7)];
  let started = performance.now();
  for (const entry of sample) {
    const outcome = await store.settleCharge(entry);
    if (outcome !== 'settled') fail(`sample settlement ${entry.generationId}: ${outcome}`);
  }
  const settleMs = performance.now() - started;
  // Each once more (a retry, a replay): nothing changes.
  for (const entry of sample.slice(0, 100))
    if ((await store.settleCharge(entry)) !== 'already-settled')
      fail(`replay of ${entry.generationId} settled`);
  const seededSample = await seed(
    client,
    tables,
    settlement,
    sample.map((entry) => ({ ...entry, accountId: seededId })),
  );
  await applySums(client, tables, seededSample.sums);
  const [settledItem, seededItem] = [
    await getItem(client, tables.accounts, settledId),
    await getItem(client, tables.accounts, seededId),
  ];
  const itemsEqual =
    canonical(settledItem, ['accountId', 'createdAt']) === canonical(seededItem, ['accountId', 'createdAt']);
  const ledgerOf = async (accountId: string) =>
    (
      await queryAllItems(client, {
        TableName: tables.ledger,
        KeyConditionExpression: 'accountId = :a AND begins_with(entryId, :g)',
        ExpressionAttributeValues: { ':a': { S: accountId }, ':g': { S: 'gen-' } },
        ConsistentRead: true,
      })
    ).items
      .map((item) => canonical(item, ['accountId']))
      .sort();
  const [settledLedger, seededLedger] = [await ledgerOf(settledId), await ledgerOf(seededId)];
  const ledgersEqual =
    settledLedger.length === SAMPLE && settledLedger.every((item, i) => item === seededLedger[i]);
  const counters = Object.keys(settledItem).filter((name) => name.startsWith('d_')).length;
  say(
    `${SAMPLE.toLocaleString('en-US')} charges settled through \`store.settleCharge\`, one after the other: ${secs(settleMs)}, ${((SAMPLE / settleMs) * 1000).toFixed(0)} a second (${GENERATIONS.toLocaleString('en-US')} at that rate: ${(((GENERATIONS / SAMPLE) * settleMs) / 60_000).toFixed(0)} min; sent in order, as every one of them updates the one account item). 100 of them settled again: already settled, nothing added.`,
  );
  say(
    `The same charges seeded (chargeItem + BatchWriteItem, then one UpdateItem of ADDs): account item ${itemsEqual ? 'equal' : 'NOT EQUAL'} (creditBalance, ${counters} tier day counters, ${Object.keys(settledItem).filter((n) => n.startsWith('kc_')).length} key day counters, ${Object.keys(settledItem).filter((n) => n.startsWith('usage_')).length} key totals), ledger items ${ledgersEqual ? 'equal' : 'NOT EQUAL'} (${settledLedger.length} and ${seededLedger.length}).`,
  );
  if (!itemsEqual)
    fail(
      `seeded account item differs from the settled one:\n${canonical(settledItem, [])}\n${canonical(seededItem, [])}`,
    );
  if (!ledgersEqual) fail('seeded ledger items differ from the settled ones');
  say('');

  // 2. The big account, seeded.
  say(`## Seeding ${GENERATIONS.toLocaleString('en-US')} generations`);
  say('');
  const bigId = 'bench-big';
  const bigKeys = await newAccount(bigId, '1000000', KEYS);
  if (SLICES > 1) await store.splitAccount(bigId, SLICES);
  started = performance.now();
  const big = await seed(
    client,
    tables,
    settlement,
    charges(bigId, bigKeys, GENERATIONS, nowMs, 42, SLICES),
    (n) => console.log(`  ${n.toLocaleString('en-US')} written, ${secs(performance.now() - started)}`),
  );
  await applySums(client, tables, big.sums);
  const seedMs = performance.now() - started;
  say(
    `${big.written.toLocaleString('en-US')} ledger items in ${secs(seedMs)} (${((big.written / seedMs) * 1000).toFixed(0)} items a second; ${big.calls.toLocaleString('en-US')} BatchWriteItem calls, ${CONCURRENCY} in flight), ${ACTIVITY_DAYS} days, ${KEYS} keys, ${TIER_IDS.length} tiers, ${SLICES} slice${SLICES > 1 ? 's' : ''}.`,
  );
  // The account item as settlements leave it when no roll-up runs: every day's counters on it.
  const bigBefore = await getItem(client, tables.accounts, bigId);

  // 3. The typical account: settled as the request path settles.
  const typicalId = 'bench-typical';
  const typicalKeys = await newAccount(typicalId, '1000', 2);
  started = performance.now();
  for (const entry of charges(typicalId, typicalKeys, TYPICAL, nowMs, 99))
    if ((await store.settleCharge(entry)) !== 'settled') fail('typical settlement not settled');
  say(
    `Typical account: ${TYPICAL} charges settled through \`store.settleCharge\` in ${secs(performance.now() - started)}.`,
  );

  // 4. The sweeper's roll-up, as its balance check runs it: until it has nothing left to move (a run
  // removes at most 60 of a slice item's past key-day counters; 30 days seeded at once leave more than a
  // sweeper running every 15 minutes would ever find).
  started = performance.now();
  const rolls: number[] = [];
  for (let run = 0; run < 10; run++) {
    const rolled = await rollUpActivity(store, nowMs);
    rolls.push(rolled);
    if (rolled === 0) break;
  }
  say(
    `Roll-up (functions/sweeper/sweep.ts rollUpActivity, today ${today}): ${rolls.length} runs (slice items rolled: ${rolls.join(', ')}) in ${secs(performance.now() - started)}.`,
  );
  const bigAfter = await getItem(client, tables.accounts, bigId);
  say('');

  // 5. The pages, timed.
  const app = createDashboardApp({
    store,
    oidc: () => Promise.reject(new Error('the bench signs in through the session store')),
    stripe: () => Promise.reject(new Error('the bench buys nothing')),
    publicOrigin: 'http://127.0.0.1',
    checkoutOrigins: [],
    originVerify: async () => [],
    now: () => fixedNow,
  });
  const cookieFor = async (accountId: string) => {
    const id = randomBytes(32).toString('base64url');
    await store.putSession({
      sessionHash: hashSessionId(id),
      accountId,
      subject: `bench-${accountId}`,
      createdAt: fixedNow.toISOString(),
      expiresAt: Math.floor(nowMs / 1000) + 12 * 3600,
    });
    // Every page reads the session's member: the bench's person owns the account, as a first sign-in makes it.
    const subject = `bench-${accountId}`;
    const at = fixedNow.toISOString();
    await store.addFirstOwner(
      { accountId, subject, email: `${subject}@example.com`, role: 'owner', joinedAt: at },
      auditEntry(accountId, { kind: 'member', subject }, 'member.joined', at),
    );
    return `${SESSION_COOKIE}=${id}`;
  };
  // Each page's DynamoDB calls, counted on the store's wire (every call the store makes goes through it).
  const wire = store.wire as unknown as { call: (operation: string, ...rest: unknown[]) => Promise<unknown> };
  const wireCall = wire.call.bind(wire);
  const calls = new Map<string, number>();
  wire.call = (operation: string, ...rest: unknown[]) => {
    calls.set(operation, (calls.get(operation) ?? 0) + 1);
    return wireCall(operation, ...rest);
  };
  const fetchPage = async (path: string, cookie: string) => {
    const t0 = performance.now();
    const response = await app.request(path, { headers: { cookie } });
    const body = await response.text();
    return { body, elapsed: performance.now() - t0, status: response.status };
  };
  interface Page {
    label: string;
    path: string;
  }
  const pagesOf = async (cookie: string): Promise<Page[]> => {
    const first = await fetchPage('/dashboard/activity', cookie);
    const next = /href="\/dashboard\/activity\?after=([^"]+)"/.exec(first.body)?.[1];
    return [
      { label: 'Settings → API (keys)', path: '/dashboard/settings/api' },
      { label: 'Billing', path: '/dashboard/billing' },
      { label: 'Activity (first page)', path: '/dashboard/activity' },
      ...(next ? [{ label: 'Activity page 2 (`?after=`)', path: `/dashboard/activity?after=${next}` }] : []),
      { label: 'CSV export (first page)', path: '/dashboard/activity.csv' },
    ];
  };
  const accounts = [
    { label: `typical (${TYPICAL} generations)`, id: typicalId },
    { label: `${GENERATIONS.toLocaleString('en-US')} generations`, id: bigId },
  ];
  const results = new Map<
    string,
    { p50: number; p99: number; max: number; calls: string; bytes: number; errors: number }
  >();
  for (const account of accounts) {
    const cookie = await cookieFor(account.id);
    const pages = await pagesOf(cookie);
    const times = new Map<string, number[]>(pages.map((p) => [p.path, []]));
    const callsOf = new Map<string, string>();
    const bytesOf = new Map<string, number>();
    const errorsOf = new Map<string, number>();
    for (const page of pages) {
      calls.clear();
      const { body, status } = await fetchPage(page.path, cookie);
      if (status !== 200) say(`${account.label}: ${page.path} answered ${status}`);
      bytesOf.set(page.path, Buffer.byteLength(body));
      callsOf.set(
        page.path,
        [...calls]
          .sort()
          .map(([op, n]) => `${n} ${op}`)
          .join(', '),
      );
    }
    for (let round = 0; round < WARMUPS + RUNS; round++)
      for (const page of pages) {
        const { elapsed, status } = await fetchPage(page.path, cookie);
        if (round < WARMUPS) continue;
        times.get(page.path)?.push(elapsed);
        if (status !== 200) errorsOf.set(page.path, (errorsOf.get(page.path) ?? 0) + 1);
      }
    for (const page of pages) {
      const sorted = (times.get(page.path) ?? []).sort((a, b) => a - b);
      results.set(`${account.id} ${page.label}`, {
        p50: percentile(sorted, 50),
        p99: percentile(sorted, 99),
        max: sorted.at(-1) ?? Number.NaN,
        calls: callsOf.get(page.path) ?? '',
        bytes: bytesOf.get(page.path) ?? 0,
        errors: errorsOf.get(page.path) ?? 0,
      });
    }
  }
  say('## Server time of each page');
  say('');
  say(
    `\`app.request\` to the last byte of the body, in this process; the session read and every DynamoDB call of the page included. ${WARMUPS} warm-ups, then ${RUNS} rounds (the pages in turn). p99 of ${RUNS} runs is the slowest but none.`,
  );
  say('');
  say('| account | page | p50 ms | p99 ms | not 200 | DynamoDB calls | body KB |');
  say('|---|---|---|---|---|---|---|');
  for (const account of accounts)
    for (const [key, r] of results)
      if (key.startsWith(`${account.id} `))
        say(
          `| ${account.label} | ${key.slice(account.id.length + 1)} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.errors} | ${r.calls} | ${(r.bytes / 1024).toFixed(1)} |`,
        );
  say('');

  // Billing's history is two Queries by entry id prefix (`begins_with(entryId, 'topup#')`, and
  // `correction#`) in the account's own partition, which holds its charges too: the same range as a
  // BETWEEN, timed beside it, says whether DynamoDB Local walks the partition for it.
  const prefixQuery = async (condition: string, values: Item) => {
    const t0 = performance.now();
    const out = await queryAllItems(client, {
      TableName: tables.ledger,
      KeyConditionExpression: `accountId = :a AND ${condition}`,
      ExpressionAttributeValues: { ':a': { S: bigId }, ...values },
      ConsistentRead: true,
    });
    return { ms: performance.now() - t0, items: out.items.length };
  };
  const beginsTimes: number[] = [];
  const betweenTimes: number[] = [];
  let found = 0;
  for (let i = 0; i < 5; i++) {
    const begins = await prefixQuery('begins_with(entryId, :p)', { ':p': { S: 'topup#' } });
    const between = await prefixQuery('entryId BETWEEN :lo AND :hi', {
      ':lo': { S: 'topup#' },
      ':hi': { S: 'topup#\uffff' },
    });
    if (begins.items !== between.items) fail(`begins_with found ${begins.items}, BETWEEN ${between.items}`);
    found = begins.items;
    beginsTimes.push(begins.ms);
    betweenTimes.push(between.ms);
  }
  const median = (values: number[]) =>
    values.sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
  say(
    `Billing's history Query on the big account's partition (${found} top-ups among its charges), median of 5: \`begins_with(entryId, 'topup#')\` as the store sends it ${ms(median(beginsTimes))} ms, the same range as \`BETWEEN\` ${ms(median(betweenTimes))} ms. DynamoDB Local reads the partition for a \`begins_with\` key condition; DynamoDB serves both from the sort key.`,
  );
  say('');

  // 6. Exactness: the page's totals against the whole ledger, read once.
  say('## Exactness of the Activity totals');
  say('');
  started = performance.now();
  const scans = await Promise.all(
    Array.from({ length: SLICES }, (_, slice) =>
      queryAllItems(client, {
        TableName: tables.ledger,
        KeyConditionExpression: 'accountId = :a',
        ExpressionAttributeValues: { ':a': { S: sliceKey(bigId, slice) } },
        ProjectionExpression: '#t, tier, amountNanoUsd, createdAt',
        ExpressionAttributeNames: { '#t': 'type' },
        ConsistentRead: true,
      }),
    ),
  );
  const scanMs = performance.now() - started;
  const byDayTier = new Map<string, bigint>();
  const byTier = new Map<string, bigint>();
  let total = 0n;
  let scanned = 0;
  const window = new Set(daysUpTo(today, ACTIVITY_DAYS));
  for (const scan of scans)
    for (const item of scan.items) {
      if (item.type?.S !== 'charge') continue;
      scanned += 1;
      const day = utcDay(item.createdAt?.S ?? '');
      if (!window.has(day)) continue;
      const tier = item.tier?.S ?? 'other';
      const nano = BigInt(item.amountNanoUsd?.N ?? '0');
      byDayTier.set(`${day} ${tier}`, (byDayTier.get(`${day} ${tier}`) ?? 0n) + nano);
      byTier.set(tier, (byTier.get(tier) ?? 0n) + nano);
      total += nano;
    }
  const scanPages = scans.reduce((sum, s) => sum + s.pages, 0);
  const scanUnits = scans.reduce((sum, s) => sum + s.units, 0);
  const cookie = await cookieFor(bigId);
  const page = await fetchPage('/dashboard/activity', cookie);
  const shownTier = (tier: string) =>
    new RegExp(`data-tier-total="${tier}">([^<]+)<`).exec(page.body)?.[1] ?? '(none)';
  const shownTotal = /data-total="30d">([^<]+)</.exec(page.body)?.[1] ?? '(none)';
  say('| | Activity page | ledger Query | |');
  say('|---|---|---|---|');
  for (const tier of TIER_IDS) {
    const expected = usd(byTier.get(tier) ?? 0n);
    const equal = shownTier(tier) === expected;
    say(`| ${tier} | ${shownTier(tier)} | ${expected} | ${equal ? 'equal' : 'NOT EQUAL'} |`);
    if (!equal) fail(`${tier}: page ${shownTier(tier)}, ledger ${expected}`);
  }
  const totalEqual = shownTotal === usd(total);
  say(`| 30 days | ${shownTotal} | ${usd(total)} | ${totalEqual ? 'equal' : 'NOT EQUAL'} |`);
  if (!totalEqual) fail(`total: page ${shownTotal}, ledger ${usd(total)}`);
  // Every day and tier too, from what the page renders (store.dailySpend), in nano-USD.
  const days: DaySpend[] = await store.dailySpend(bigId, { today, days: ACTIVITY_DAYS });
  let cells = 0;
  let cellMismatches = 0;
  const seen = new Set<string>();
  for (const day of days)
    for (const [tier, nano] of Object.entries(day.byTier)) {
      cells += 1;
      seen.add(`${day.day} ${tier}`);
      if (byDayTier.get(`${day.day} ${tier}`) !== nano) cellMismatches += 1;
    }
  for (const key of byDayTier.keys()) if (!seen.has(key)) cellMismatches += 1;
  say('');
  say(
    `Every day x tier of \`dailySpend\` (what the page draws): ${cells} cells, ${cellMismatches === 0 ? 'all equal to the ledger to the nano-dollar' : `${cellMismatches} NOT EQUAL`}.`,
  );
  if (cellMismatches > 0) fail(`${cellMismatches} day x tier cells differ from the ledger`);
  const activityP50 = results.get(`${bigId} Activity (first page)`)?.p50 ?? Number.NaN;
  say('');
  say(
    `The ledger Query behind the check (${scanned.toLocaleString('en-US')} charges, ${scanPages} pages of 1 MB, projected to type, tier, amount and time, strongly consistent): ${secs(scanMs)}, ${scanUnits.toLocaleString('en-US')} read units. What a per-view scan would cost, against the Activity page's ${ms(activityP50)} ms p50.`,
  );
  say('');

  // 7. What the daily totals cost the settlement.
  say('## What the daily totals cost the request path');
  say('');
  const size = (item: Item) => itemSize(item as unknown as Parameters<typeof itemSize>[0]);
  const withoutCounters = (item: Item) =>
    Object.fromEntries(
      Object.entries(item).filter(([name]) => !name.startsWith('d_') && !name.startsWith('kc_')),
    ) as Item;
  const countOf = (item: Item, prefix: string) =>
    Object.keys(item).filter((name) => name.startsWith(prefix)).length;
  const ledgerItem = chargeItem(sample[0] as ChargeEntry);
  const row = (label: string, item: Item) =>
    say(
      `| ${label} | ${countOf(item, 'd_')} | ${countOf(item, 'kc_')} | ${size(item)} | ${writeUnits(size(item), true)} |`,
    );
  say(
    "The settlement writes no extra item: its transaction is the ledger Put and the account (slice) Update it always was; the day counter is one more `ADD #day :billed` in that Update (and the key's day counter of the daily caps, `kc_`, one more). What they cost is their bytes on the account item: a transactional write is 2 units per KB of the item (the larger of before and after). Retries and replays add nothing: a settlement whose ledger entry exists is cancelled whole (checked above on 100 replays).",
  );
  say('');
  say(
    '| account item of the big account | tier day counters (`d_`) | key day counters (`kc_`) | bytes | units of its transactional write |',
  );
  say('|---|---|---|---|---|');
  row('without any day counter', withoutCounters(bigAfter));
  row("as the sweeper leaves it (today's counters only)", bigAfter);
  row(
    `with every day's counters (${ACTIVITY_DAYS} days x ${TIER_IDS.length} tiers, x ${KEYS} keys: no roll-up ever ran)`,
    bigBefore,
  );
  say('');
  say(
    `A charge's ledger item: ${size(ledgerItem)} bytes, ${writeUnits(size(ledgerItem), true)} units transactional. A settlement here: ${writeUnits(size(ledgerItem), true)} + ${writeUnits(size(bigAfter), true)} write units with the counters as the sweeper leaves them, ${writeUnits(size(ledgerItem), true)} + ${writeUnits(size(withoutCounters(bigAfter)), true)} without them.`,
  );
  say('');
  say(failed ? 'RESULT: MISMATCH (see above)' : 'RESULT: every check passed');

  client.destroy();
  await dynamo.stop();
  process.exit(failed ? 1 : 0);
}

await main();
