import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findEngine, freePort, startDynamoLocal } from '../../../lib/local/dynamodb-local.js';

/** A data directory whose engine file names `ownerPid`, with nothing answering at its endpoint. */
async function dataDirHeldBy(ownerPid: number) {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-engine-'));
  const endpoint = `http://127.0.0.1:${await freePort()}`;
  writeFileSync(join(dataDir, 'engine.json'), JSON.stringify({ endpoint, ownerPid }));
  return dataDir;
}

describe('the engine file of a DynamoDB Local data directory', () => {
  it('a live owner that does not answer: findEngine refuses in one line, and no second engine starts', async () => {
    const dataDir = await dataDirHeldBy(process.pid);
    await expect(findEngine(dataDir)).rejects.toThrow(new RegExp(`pid ${process.pid}\\b.*does not answer`));
    await expect(startDynamoLocal({ dataDir })).rejects.toThrow(/is starting or running/);
  });

  it('a file left by a process that died is ignored', async () => {
    const dataDir = await dataDirHeldBy(2 ** 31 - 1); // above any Linux pid_max
    await expect(findEngine(dataDir)).resolves.toBeUndefined();
  });
});
