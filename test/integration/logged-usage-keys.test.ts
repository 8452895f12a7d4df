import { randomBytes } from 'node:crypto';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { clearSecretCache, setSecretsClient } from '../../functions/adapters/secrets.js';
import { newGenerationId } from '../../functions/core/ids.js';
import { handler } from '../../functions/logged-usage/handler.js';
import { ensureTables, localClient } from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { TABLE_ENV } from '../../lib/tables.js';
import { accountWith, chargeEntry } from '../support/fixtures.js';
import { subscriptionEvent } from '../support/logs-subscription.js';
import { signedUsageLine } from '../support/usage-lines.js';

/**
 * The logged-usage function as Lambda runs it, its signing key in Secrets Manager (mocked: no
 * emulator of it exists here) and its store on DynamoDB Local: a line signed with the key's current
 * or previous version is billed; one signed with a version newer than the function's copy (a rotation
 * in the last 5 minutes) is billed after the secret is read again; a forged one is refused; without
 * its key or its tiers the invocation fails (Lambda retries it), never counting a genuine line refused.
 */
const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:usage-signing-AbCdEf';
const secrets = mockClient(SecretsManagerClient);
const tables = localTableNames(`keys${randomBytes(3).toString('hex')}-`);
const store = new DynamoStore(localClient(inject('dynamoEndpoint')), tables);
const CONTEXT = { functionName: 'LoggedUsage', awsRequestId: 'keys-test' } as Context;
const ENV = {
  DYNAMODB_ENDPOINT: inject('dynamoEndpoint'),
  [TABLE_ENV.keys]: tables.keys,
  [TABLE_ENV.accounts]: tables.accounts,
  [TABLE_ENV.ledger]: tables.ledger,
  [TABLE_ENV.holds]: tables.holds,
  USAGE_SIGNING_SECRET_ARN: ARN,
  UPSTREAM_BASE_URL: 'http://simulator.invalid/v1',
};

beforeAll(async () => {
  await ensureTables(localClient(inject('dynamoEndpoint')), tables);
  Object.assign(process.env, ENV);
});
afterAll(() => {
  for (const name of Object.keys(ENV)) delete process.env[name];
  secrets.restore();
});
beforeEach(() => {
  secrets.reset();
  clearSecretCache();
  setSecretsClient(new SecretsManagerClient({ region: 'eu-west-1' }));
});

/** The key's versions as Secrets Manager answers them. */
function versions(current: string, previous?: string) {
  secrets.on(GetSecretValueCommand, { VersionStage: 'AWSCURRENT' }).resolves({ SecretString: current });
  if (previous)
    secrets.on(GetSecretValueCommand, { VersionStage: 'AWSPREVIOUS' }).resolves({ SecretString: previous });
  else
    secrets
      .on(GetSecretValueCommand, { VersionStage: 'AWSPREVIOUS' })
      .rejects(Object.assign(new Error('no AWSPREVIOUS version'), { name: 'ResourceNotFoundException' }));
}

async function killedGeneration(key: string) {
  const { accountId, keyId } = await accountWith(store, '1');
  const entry = chargeEntry(accountId, keyId, 1_300n, { generationId: newGenerationId(Date.now(), 0) });
  const event = subscriptionEvent([
    { message: signedUsageLine(entry, undefined, key), timestamp: Date.now() - 60_000 },
  ]);
  return { accountId, entry, event };
}

describe('the logged-usage function and its signing key', () => {
  it("bills a line signed with the key's current version, then one signed just after a rotation", async () => {
    versions('key-1');
    const before = await killedGeneration('key-1');
    expect(await handler(before.event, CONTEXT)).toMatchObject({
      billed: [before.entry.generationId],
      refused: 0,
    });
    // Rotated: the function still holds key-1 (read less than 5 minutes ago) when a line signed with key-2 comes.
    secrets.reset();
    versions('key-2', 'key-1');
    const after = await killedGeneration('key-2');
    expect(await handler(after.event, CONTEXT)).toMatchObject({
      billed: [after.entry.generationId],
      refused: 0,
    });
    // And a line its function signed with key-1 just before the rotation.
    const late = await killedGeneration('key-1');
    expect(await handler(late.event, CONTEXT)).toMatchObject({
      billed: [late.entry.generationId],
      refused: 0,
    });
  });

  it('refuses a line signed with another key, charging nothing', async () => {
    versions('key-1');
    const forged = await killedGeneration('not-the-key');
    expect(await handler(forged.event, CONTEXT)).toMatchObject({ billed: [], refused: 1 });
    expect((await store.getAccount(forged.accountId))?.balanceNano).toBe(1_000_000_000n);
  });

  it('fails the invocation, refusing nothing, when its key cannot be read or is not configured', async () => {
    secrets.on(GetSecretValueCommand).rejects(new Error('AccessDeniedException'));
    const unread = await killedGeneration('key-1');
    await expect(handler(unread.event, CONTEXT)).rejects.toThrow(/AccessDenied/);
    delete process.env.USAGE_SIGNING_SECRET_ARN;
    try {
      await expect(handler(unread.event, CONTEXT)).rejects.toThrow(/USAGE_SIGNING_SECRET_ARN/);
    } finally {
      process.env.USAGE_SIGNING_SECRET_ARN = ARN;
    }
    expect((await store.getAccount(unread.accountId))?.balanceNano).toBe(1_000_000_000n);
  });
});
