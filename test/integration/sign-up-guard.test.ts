/**
 * The dashboard's pre-sign-up trigger (functions/sign-up-guard/) against DynamoDB Local, its calls
 * held by the IAM layer to its role as the stack synthesizes it (lib/infra/dashboard.ts): a burst of
 * sign-ups at once never admits more than a cap, and the counter says exactly how many it admitted;
 * one after another they fill a cap exactly and the next is refused with the limit named; a domain's
 * cap refuses that domain only; an administrator's sign-up is not counted. Its role needed exactly
 * what it is granted, and no call was refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignUpCounters } from '../../functions/adapters/dynamodb/sign-up.js';
import { guardSignUp, SIGN_UP_REFUSED } from '../../functions/sign-up-guard/guard.js';
import { localPolicies } from '../../lib/local/iam-policies.js';
import type { LocalStack } from '../../lib/local/stack.js';
import { startTarget, type Target } from '../support/target.js';

let target: Target;
let local: LocalStack;
let counters: SignUpCounters;

beforeAll(async () => {
  target = await startTarget();
  local = target.local as LocalStack;
  const store = local.storeAs('signUpGuard');
  counters = new SignUpCounters({ client: store.client, tables: store.tables, wire: store.wire });
}, 120_000);
afterAll(async () => {
  await target?.stop();
});

/** A distinct hour (and day) for each test: its own counters. */
let hours = 0;
const freshHour = () => new Date(Date.UTC(2031, 0, 1 + hours++, 12, 30));

const signUp = (email: string, triggerSource = 'PreSignUp_SignUp') => ({
  triggerSource,
  request: { userAttributes: { email } },
});
const outcome = (promise: Promise<unknown>) =>
  promise.then(
    () => 'admitted' as const,
    (error: Error & { limit?: string }) => {
      expect(error.message).toBe(SIGN_UP_REFUSED);
      return error.limit as string;
    },
  );

describe('sign-up limits', () => {
  it('a burst of 40 at once under a cap of 10 an hour: at most 10 admitted, each one counted', async () => {
    const at = freshHour();
    const caps = { perHour: 10, perDay: 1_000, perDomainPerDay: 1_000 };
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        outcome(guardSignUp(signUp(`bot${i}@example.org`), { counters, caps, now: () => at })),
      ),
    );
    const admitted = results.filter((r) => r === 'admitted').length;
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThanOrEqual(10);
    expect(results.filter((r) => r !== 'admitted').every((r) => r === 'hour')).toBe(true);
    // One after another, the rest of the hour's places fill exactly, and the next is refused.
    for (let i = admitted; i < 10; i++)
      expect(
        await outcome(guardSignUp(signUp(`late${i}@example.org`), { counters, caps, now: () => at })),
      ).toBe('admitted');
    expect(
      await outcome(guardSignUp(signUp('one-more@example.org'), { counters, caps, now: () => at })),
    ).toBe('hour');
  });

  it("a domain's cap refuses that domain only; the day's cap counts every domain", async () => {
    const at = freshHour();
    const caps = { perHour: 100, perDay: 5, perDomainPerDay: 2 };
    const deps = { counters, caps, now: () => at };
    expect(await outcome(guardSignUp(signUp('a@Spam.example'), deps))).toBe('admitted');
    expect(await outcome(guardSignUp(signUp('b@spam.example'), deps))).toBe('admitted');
    expect(await outcome(guardSignUp(signUp('c@spam.example'), deps))).toBe('domain');
    expect(await outcome(guardSignUp(signUp('a@good.example'), deps))).toBe('admitted');
    expect(await outcome(guardSignUp(signUp('b@good.example'), deps))).toBe('admitted');
    expect(await outcome(guardSignUp(signUp('a@third.example'), deps))).toBe('admitted');
    expect(await outcome(guardSignUp(signUp('b@third.example'), deps))).toBe('day');
  });

  it("an administrator's or a federated sign-up is not limited", async () => {
    const at = freshHour();
    const caps = { perHour: 1, perDay: 1, perDomainPerDay: 1 };
    const deps = { counters, caps, now: () => at };
    expect(await outcome(guardSignUp(signUp('x@example.org'), deps))).toBe('admitted');
    expect(await outcome(guardSignUp(signUp('y@example.org', 'PreSignUp_AdminCreateUser'), deps))).toBe(
      'admitted',
    );
    expect(await outcome(guardSignUp(signUp('z@example.org', 'PreSignUp_ExternalProvider'), deps))).toBe(
      'admitted',
    );
    expect(await outcome(guardSignUp(signUp('w@example.org'), deps))).toBe('hour');
  });

  it('its role needed exactly what the stack grants it, and nothing was refused', async () => {
    const table = (arn: string) =>
      arn.replace(/^arn:aws:dynamodb:[^:]+:\d+:table\/HostedModelApi-sandbox-/, '');
    const used = local.iam
      .allowed()
      .filter((p) => p.principal === 'signUpGuard')
      .map((p) => `${p.action} ${table(p.resource)}`);
    const granted = (await localPolicies()).principals.signUpGuard.statements
      .filter((s) => s.effect === 'Allow')
      .flatMap((s) => s.actions.flatMap((a) => s.resources.map((r) => `${a} ${table(r)}`)))
      .filter((p) => p.startsWith('dynamodb:'));
    expect(used.sort()).toEqual(granted.sort());
    expect(local.iam.denials().filter((d) => d.principal === 'signUpGuard')).toEqual([]);
  });
});
