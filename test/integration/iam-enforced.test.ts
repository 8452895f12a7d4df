import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { usageRecordOf } from '../../functions/billing/usage-record.js';
import type { Hold } from '../../functions/core/store.js';
import { sweepExpiredHolds } from '../../functions/sweeper/sweep.js';
import { createAccount, createKey, listLedger } from '../../lib/admin/operations.js';
import { credentialEnv } from '../../lib/local/iam.js';
import { localPolicies, type PolicySet } from '../../lib/local/iam-policies.js';
import { chargeEntry } from '../support/fixtures.js';
import { subscriptionEvent } from '../support/logs-subscription.js';
import { readSse } from '../support/sse.js';
import { newAccount, startTarget, type Target } from '../support/target.js';
import { usageLineOf } from '../support/usage-lines.js';

/**
 * IAM as AWS enforces it, on the local stack: every DynamoDB call of a function is held to that
 * function's role as the CDK stack synthesizes it, item by item inside a transaction
 * (lib/local/iam.ts). These are the calls a missing grant broke without anyone seeing it: a held
 * request's usage record on its hold, a deferred settlement, the sweeper completing it, the
 * logged-usage function billing a killed function's line. Any refusal also fails the file when its
 * target stops (test/support/target.ts).
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

const local = () => {
  if (!target.local) throw new Error('IAM is enforced on the local stack');
  return target.local;
};

async function complete(key: string, stream: boolean, base = target.baseUrl) {
  const response = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], stream }),
  });
  if (stream) await readSse(response);
  else await response.text();
  return response.status;
}

describe("the completions function's role", () => {
  it('lets a held request (JSON and stream) keep its usage record on its hold and settle', async () => {
    const { key } = await newAccount(target, '0.001');
    expect(await complete(key, false)).toBe(200);
    expect(await complete(key, true)).toBe(200);
    expect(local().iam.denials()).toEqual([]);
    const holdsTable = local()
      .iam.allowed()
      .filter((p) => p.principal === 'completions' && p.resource.endsWith('-holds'))
      .map((p) => p.action);
    expect(holdsTable).toEqual(expect.arrayContaining(['dynamodb:PutItem', 'dynamodb:UpdateItem']));
  });

  it('lets a settlement be deferred onto its hold, or onto a hold of its own, and the sweeper complete both', async () => {
    const { accountId, keyId } = await newAccount(target, '1');
    const completions = local().storeAs('completions');
    const held = chargeEntry(accountId, keyId, 1_000n);
    const hold: Hold = {
      accountId,
      holdId: held.generationId,
      amountNano: 5_000n,
      expiresAt: Date.now() + 60_000,
      createdAt: new Date().toISOString(),
    };
    expect(await completions.placeHold(hold)).toBe('held');
    const deadline = Date.now() + 5_000;
    expect(
      await completions.deferSettlement(held, JSON.stringify(usageRecordOf(held, hold)), { hold, deadline }),
    ).toBe('deferred');
    const fast = chargeEntry(accountId, keyId, 2_000n);
    expect(
      await completions.deferSettlement(fast, JSON.stringify(usageRecordOf(fast, undefined)), { deadline }),
    ).toBe('deferred');
    const swept = await sweepExpiredHolds(local().storeAs('sweeper'), Date.now() + 120_000);
    expect(swept.completed).toBeGreaterThanOrEqual(2);
    const charges = (await listLedger(target.admin, accountId)).filter((e) => e.type === 'charge');
    expect(charges.map((e) => e.entryId).sort()).toEqual([held.generationId, fast.generationId].sort());
    expect(local().iam.denials()).toEqual([]);
  });
});

describe("the logged-usage function's role", () => {
  it("bills a killed function's usage line: the ledger read, then the settlement", async () => {
    const { accountId, keyId } = await newAccount(target, '1');
    // Billed at its upstream cost ($0.000001) x 1.3, signed with the key the local stack gave the functions.
    const entry = chargeEntry(accountId, keyId, 1_300n);
    const loggedAt = Date.now() - 15 * 60_000;
    const line = usageLineOf(usageRecordOf(entry, undefined), process.env.USAGE_SIGNING_KEY ?? null, {
      timestamp: new Date(loggedAt).toISOString(),
    });
    // As Lambda runs it: its role's credentials in the environment before its store is made.
    Object.assign(process.env, credentialEnv('loggedUsage'));
    try {
      const { handler } = await import('../../functions/logged-usage/handler.js');
      const result = await handler(subscriptionEvent([{ message: line, timestamp: loggedAt }]), {
        functionName: 'LoggedUsage',
        awsRequestId: 'iam-test',
      } as never);
      expect(result.billed).toEqual([entry.generationId]);
    } finally {
      for (const name of Object.keys(credentialEnv('loggedUsage'))) delete process.env[name];
    }
    expect(
      local()
        .iam.allowed()
        .some((p) => p.principal === 'loggedUsage'),
    ).toBe(true);
    expect(local().iam.denials()).toEqual([]);
  });
});

describe('a grant removed from the synthesized policy', () => {
  it("is refused as AWS refuses it: the held request's usage record, named by action and table", async () => {
    const policies = structuredClone(await localPolicies()) as PolicySet;
    const statements = policies.principals.completions.statements;
    for (const statement of statements)
      if (statement.resources.some((r) => r.endsWith('-holds')))
        statement.actions = statement.actions.filter((a) => a !== 'dynamodb:UpdateItem');
    const { startLocalStack } = await import('../../lib/local/stack.js');
    const narrowed = await startLocalStack({
      dynamoEndpoint: inject('dynamoEndpoint'),
      tablePrefix: `iam${randomBytes(3).toString('hex')}-`,
      policies,
    });
    try {
      await createAccount({ store: narrowed.store }, 'narrowed', '0.001');
      const { key } = await createKey({ store: narrowed.store }, 'narrowed', 'test');
      // The reply still goes out and the request is still billed: the record on the hold is the
      // insurance against a function killed before its settlement, and it is what was refused.
      expect(await complete(key, false, narrowed.baseUrl)).toBe(200);
      const refused = narrowed.iam.takeDenials();
      expect(refused.map((d) => [d.principal, d.action])).toEqual([['completions', 'dynamodb:UpdateItem']]);
      expect(refused[0]?.resource).toBe(`arn:aws:dynamodb:local:000000000000:table/${policies.tables.holds}`);
      expect(refused[0]?.message).toMatch(
        /^User: arn:aws:sts::000000000000:assumed-role\/CompletionsFunctionServiceRole\w+\/completions is not authorized to perform: dynamodb:UpdateItem on resource: .* because no identity-based policy allows the dynamodb:UpdateItem action$/,
      );
    } finally {
      await narrowed.stop();
    }
  });
});
