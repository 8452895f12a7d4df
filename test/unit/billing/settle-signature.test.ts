import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { clearSecretCache, setSecretsClient } from '../../../functions/adapters/secrets.js';
import type { Bill } from '../../../functions/billing/bill.js';
import { settle } from '../../../functions/billing/settle.js';
import { GENERATION_USAGE_MESSAGE } from '../../../functions/billing/usage-line.js';
import { readUsageLine, refusalOf } from '../../../functions/billing/usage-lines.js';
import { usageRecordSigned } from '../../../functions/billing/usage-record.js';
import { newGenerationId } from '../../../functions/core/ids.js';
import type { Hold } from '../../../functions/core/store.js';
import { logger } from '../../../functions/shared/observability.js';
import { chargeEntry } from '../../support/fixtures.js';
import { MemoryStore } from '../../support/memory-store.js';
import { SIMULATOR_TIERS, TEST_SIGNING_KEY } from '../../support/usage-lines.js';

/**
 * The usage line a settlement logs is signed with the usage-signing key, over the record's text as
 * logged and kept on its hold, so the log readers bill it; a key that is not configured, or not read
 * in time, leaves the line unsigned (an error logged) and never holds up or stops the settlement.
 */
const secrets = mockClient(SecretsManagerClient);

beforeEach(() => {
  secrets.reset();
  clearSecretCache();
  setSecretsClient(new SecretsManagerClient({ region: 'eu-west-1' }));
  delete process.env.USAGE_SIGNING_KEY;
  delete process.env.USAGE_SIGNING_SECRET_ARN;
});
afterEach(() => {
  vi.restoreAllMocks();
  delete process.env.USAGE_SIGNING_KEY;
  delete process.env.USAGE_SIGNING_SECRET_ARN;
});

async function settled(held: boolean) {
  const store = new MemoryStore();
  await store.createAccount('acct', 1_000_000_000n, new Date().toISOString());
  const generationId = newGenerationId(Date.now(), 0);
  const entry = chargeEntry('acct', 'key', 1_300n, { generationId });
  const hold: Hold | undefined = held
    ? {
        accountId: 'acct',
        holdId: generationId,
        amountNano: 5_000n,
        expiresAt: Date.now() + 60_000,
        createdAt: '',
      }
    : undefined;
  if (hold) await store.placeHold(hold);
  const kept: string[] = [];
  const recordUsageOnHold = store.recordUsageOnHold.bind(store);
  store.recordUsageOnHold = async (h, text) => {
    kept.push(text);
    return recordUsageOnHold(h, text);
  };
  const lines: string[] = [];
  vi.spyOn(logger, 'info').mockImplementation(((message: string, fields: object) => {
    if (message === GENERATION_USAGE_MESSAGE) lines.push(JSON.stringify({ message, ...fields }));
  }) as typeof logger.info);
  const errors = vi.spyOn(logger, 'error').mockImplementation(() => {});
  const bill = { entry, billedNano: entry.billedNano, usage: {} } as unknown as Bill;
  const deadlines = { startedAt: Date.now(), estimate: Date.now(), settleCallBy: () => Date.now() + 10_000 };
  const started = Date.now();
  const outcome = await settle(bill, { hold, deadlines }, store);
  return { outcome, ms: Date.now() - started, lines, errors, kept };
}

describe('the usage line of a settlement', () => {
  it("is signed with the key, over the record's text as logged and as kept on its hold", async () => {
    process.env.USAGE_SIGNING_KEY = TEST_SIGNING_KEY;
    const { outcome, lines, errors, kept } = await settled(true);
    expect(outcome).toBe('settled');
    expect(lines).toHaveLength(1);
    const read = readUsageLine(lines[0] ?? '');
    if (read?.kind !== 'record') throw new Error('not a usage record');
    expect(refusalOf(read.generation, { keys: [TEST_SIGNING_KEY], tiers: SIMULATOR_TIERS })).toBeUndefined();
    expect(refusalOf(read.generation, { keys: ['another key'], tiers: SIMULATOR_TIERS })).toBe(
      'signature does not match',
    );
    expect(errors).not.toHaveBeenCalled();
    // The record kept on the hold is the very text signed.
    const { signature } = JSON.parse(lines[0] ?? '{}') as { signature: string };
    expect(kept).toHaveLength(1);
    expect(usageRecordSigned(kept[0] ?? '', signature, [TEST_SIGNING_KEY])).toBe(true);
  });

  it("is signed with the secret's current version in Lambda, read once for many settlements", async () => {
    process.env.USAGE_SIGNING_SECRET_ARN = 'arn:usage-signing';
    secrets.on(GetSecretValueCommand).resolves({ SecretString: 'from-secrets-manager' });
    for (let i = 0; i < 3; i++) {
      const { lines } = await settled(false);
      const read = readUsageLine(lines[0] ?? '');
      if (read?.kind !== 'record') throw new Error('not a usage record');
      expect(
        refusalOf(read.generation, { keys: ['from-secrets-manager'], tiers: SIMULATOR_TIERS }),
      ).toBeUndefined();
    }
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });

  it('is logged unsigned, an error said, and the settlement goes on, when there is no key', async () => {
    const { outcome, lines, errors } = await settled(false);
    expect(outcome).toBe('settled');
    expect(JSON.parse(lines[0] ?? '{}')).not.toHaveProperty('signature');
    expect(errors).toHaveBeenCalledWith(expect.stringMatching(/^usage line not signed/), expect.anything());
  });

  it('is logged unsigned within 2 s when Secrets Manager does not answer, and the settlement goes on', async () => {
    process.env.USAGE_SIGNING_SECRET_ARN = 'arn:usage-signing';
    secrets.on(GetSecretValueCommand).callsFake(() => new Promise(() => {}));
    const { outcome, lines, errors, ms } = await settled(false);
    expect(outcome).toBe('settled');
    expect(ms).toBeGreaterThanOrEqual(1_900);
    expect(ms).toBeLessThan(5_000);
    expect(JSON.parse(lines[0] ?? '{}')).not.toHaveProperty('signature');
    expect(errors).toHaveBeenCalledWith(expect.stringMatching(/^usage line not signed/), expect.anything());
  });
});
