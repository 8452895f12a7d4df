/**
 * Loaded into the benchmarked gateway process (`node --import tsx --import ./bench/probe.ts`) to
 * measure from inside it (issue 15): every DynamoDB client the process creates gets an SDK
 * middleware that asks for `ReturnConsumedCapacity: TOTAL` and adds up the read and write units
 * DynamoDB reports, and on SIGUSR2 the process prints one `PROBE {json}` line with those totals,
 * its own CPU time (`process.cpuUsage`), its memory (`process.memoryUsage`) and its peak RSS
 * (`process.resourceUsage().maxRSS`). The adapter itself is not changed.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';

interface Capacity {
  CapacityUnits?: number;
  ReadCapacityUnits?: number;
  WriteCapacityUnits?: number;
}

const totals = {
  calls: 0,
  readUnits: 0,
  writeUnits: 0,
  capacityUnits: 0,
  byCommand: {} as Record<string, number>,
};
const READ_COMMANDS = new Set([
  'GetItemCommand',
  'BatchGetItemCommand',
  'QueryCommand',
  'ScanCommand',
  'TransactGetItemsCommand',
]);
const instrumented = new WeakSet<object>();

function add(capacity: Capacity | Capacity[] | undefined, command: string): void {
  for (const entry of Array.isArray(capacity) ? capacity : capacity ? [capacity] : []) {
    const total = entry.CapacityUnits ?? 0;
    totals.capacityUnits += total;
    // DynamoDB Local reports CapacityUnits only; which kind they are follows from the command.
    const read = entry.ReadCapacityUnits ?? (READ_COMMANDS.has(command) ? total : 0);
    const write = entry.WriteCapacityUnits ?? (READ_COMMANDS.has(command) ? 0 : total);
    totals.readUnits += read;
    totals.writeUnits += write;
  }
}

type Send = (this: DynamoDBClient, ...args: unknown[]) => Promise<unknown>;
const prototype = DynamoDBClient.prototype as unknown as { send: Send };
const send = prototype.send;
prototype.send = function (this: DynamoDBClient, ...args: unknown[]) {
  if (!instrumented.has(this)) {
    instrumented.add(this);
    this.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as Record<string, unknown>;
        input.ReturnConsumedCapacity = 'TOTAL';
        const result = await next(args);
        const command = String(context.commandName);
        totals.calls += 1;
        totals.byCommand[command] = (totals.byCommand[command] ?? 0) + 1;
        add((result.output as { ConsumedCapacity?: Capacity | Capacity[] }).ConsumedCapacity, command);
        return result;
      },
      { step: 'initialize', name: 'benchConsumedCapacity' },
    );
  }
  return send.apply(this, args);
};

process.on('SIGUSR2', () => {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  console.log(
    `PROBE ${JSON.stringify({
      dynamo: totals,
      cpuUserUs: cpu.user,
      cpuSystemUs: cpu.system,
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      external: memory.external,
      maxRssKb: process.resourceUsage().maxRSS,
      at: performance.now(),
    })}`,
  );
});
