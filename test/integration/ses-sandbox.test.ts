/**
 * SES as a new account meets it, through the SES stand-in held to the synthesized policies (the
 * balance watch's role, lib/infra/email.ts's grant) and the balance watch's own SendEmail call and
 * outbox: in production mode a message goes; in the sandbox an unverified recipient is refused and
 * the watch drops that message instead of retrying it every run, a verified recipient is refused by
 * IAM unless the grant names its identity (`-c sesSandboxRecipients=...`), a From identity still
 * unverified keeps the message for a later run, and a suppressed recipient is accepted and not
 * delivered (no retry). Another role, without the grant, is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permanentSesError, sendEmail } from '../../functions/adapters/ses.js';
import { runWatch } from '../../functions/balance-watch/watch.js';
import { credentialsOf, deniedCall, principalOfKey } from '../../lib/local/iam.js';
import { localPolicies, type PolicySet, synthesizePolicies } from '../../lib/local/iam-policies.js';
import { type RunningSesStandIn, startSesStandIn } from '../../lib/local/ses.js';
import { MemoryWatchStore } from '../support/memory-watch.js';

let policies: PolicySet;
const running: RunningSesStandIn[] = [];

beforeAll(async () => {
  policies = await localPolicies();
}, 240_000);
afterAll(async () => {
  await Promise.all(running.map((ses) => ses.close()));
});

/** The stand-in as the local stack starts it: the stack's identity, its default configuration set, IAM. */
async function standIn(mode: 'sandbox' | 'production', set: PolicySet = policies) {
  const ses = await startSesStandIn({
    sender: set.email.sender,
    identities: [set.email.identity],
    defaultConfigurationSets: { [set.email.identity]: set.email.configurationSet },
    mode,
    arnPrefix: `arn:aws:ses:${set.region}:${set.account}:`,
    authorize: ({ accessKeyId, needed, context }) => {
      const principal = principalOfKey(set, accessKeyId);
      if (!principal) return { code: 'UnrecognizedClientException', message: 'invalid token' };
      const denial = deniedCall(set, principal, needed, context);
      return denial ? { code: 'AccessDeniedException', message: denial.message } : undefined;
    },
  });
  running.push(ses);
  return ses;
}

const as = (ses: RunningSesStandIn, principal: 'balanceWatch' | 'dashboard' = 'balanceWatch') => ({
  url: ses.url,
  region: 'local',
  credentials: credentialsOf(principal),
});
const mail = (ses: RunningSesStandIn, to: string) => ({
  from: ses.sender,
  to,
  subject: 'Low',
  text: 'Balance',
});
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: Error & { permanent?: boolean }) => error,
  );

/** The watch's clock: each reading ten minutes on, past any send lease a run before took. */
let clock = Date.now();
const tick = () => {
  clock += 10 * 60_000;
  return new Date(clock);
};

/** One queued e-mail and a watch run over it, with the watch's SES call as its mailer. */
async function watchRun(ses: RunningSesStandIn, watches: MemoryWatchStore, to?: string) {
  if (to)
    watches.outbox.set('outbox#a#alert-1', {
      id: 'outbox#a#alert-1',
      accountId: 'a',
      to,
      subject: 'Low',
      text: 'Balance',
      createdAt: new Date().toISOString(),
      attempts: 0,
    });
  return runWatch({
    watches,
    store: { getAccount: async () => undefined },
    payments: async () => {
      throw new Error('no payment in this test');
    },
    mailer: { send: (email) => sendEmail(as(ses), email), permanent: permanentSesError },
    from: ses.sender,
    now: tick,
  });
}

describe('production mode', () => {
  it('sends to any recipient with the synthesized grant (identity and its default configuration set)', async () => {
    const ses = await standIn('production');
    await sendEmail(as(ses), mail(ses, 'customer@example.org'));
    expect(ses.messages.map((m) => m.to)).toEqual([['customer@example.org']]);
    expect(ses.refusals).toEqual([]);
  });

  it('refuses a role without the grant: AccessDeniedException on the sender identity', async () => {
    const ses = await standIn('production');
    const error = await failure(sendEmail(as(ses, 'dashboard'), mail(ses, 'customer@example.org')));
    expect(error?.name).toBe('AccessDeniedException');
    expect(error?.message).toContain(`identity/${policies.email.identity}`);
    expect(error?.permanent).toBeUndefined();
  });

  it('accepts a message to a suppressed address and drops it; the watch deletes it once, no retry', async () => {
    const ses = await standIn('production');
    ses.suppress('bounced@example.org');
    const watches = new MemoryWatchStore();
    const run = await watchRun(ses, watches, 'bounced@example.org');
    expect(run).toMatchObject({ sent: 1, failures: 0 });
    expect(ses.messages).toEqual([]);
    expect(ses.suppressedSends.map((m) => m.to)).toEqual([['bounced@example.org']]);
    expect(watches.outbox.size).toBe(0);
  });
});

describe('sandbox mode (a new account)', () => {
  it('refuses an unverified recipient; the watch drops that message as permanent and does not send it again', async () => {
    const ses = await standIn('sandbox');
    const error = await failure(sendEmail(as(ses), mail(ses, 'customer@example.org')));
    expect(error?.name).toBe('MessageRejected');
    expect(error?.permanent).toBe(true);

    const watches = new MemoryWatchStore();
    const first = await watchRun(ses, watches, 'customer@example.org');
    // Dead-lettered at once, not a watch failure: the watch's error alarm keeps its meaning.
    expect(first).toMatchObject({ sent: 0, failures: 0, deadLettered: 1 });
    expect(watches.outbox.size).toBe(0);
    const refusals = ses.refusals.length;
    expect(await watchRun(ses, watches)).toMatchObject({ sent: 0, failures: 0 });
    expect(ses.refusals.length).toBe(refusals);
  });

  it('refuses a verified recipient when the grant covers the sender identity only: AccessDenied on its identity', async () => {
    const ses = await standIn('sandbox');
    ses.verify('customer@example.org');
    const error = await failure(sendEmail(as(ses), mail(ses, 'customer@example.org')));
    expect(error?.name).toBe('AccessDeniedException');
    expect(error?.message).toContain('identity/customer@example.org');
    expect(ses.messages).toEqual([]);
  });

  it('sends to a verified recipient whose identity the grant names (-c sesSandboxRecipients=...)', async () => {
    const withRecipients = await synthesizePolicies({
      sesSandboxRecipients: 'customer@example.org, example.net',
    });
    const ses = await standIn('sandbox', withRecipients);
    ses.verify('customer@example.org');
    ses.verify('example.net');
    await sendEmail(as(ses), mail(ses, 'customer@example.org'));
    await sendEmail(as(ses), mail(ses, 'ops@example.net'));
    expect(ses.messages.map((m) => m.to)).toEqual([['customer@example.org'], ['ops@example.net']]);
  }, 240_000);

  it('keeps a message whose From identity is not verified yet (not permanent): a later run sends it', async () => {
    const unverified = await startSesStandIn({ sender: policies.email.sender, identities: [] });
    running.push(unverified);
    const error = await failure(sendEmail(as(unverified), mail(unverified, 'customer@example.org')));
    expect(error?.name).toBe('MessageRejected');
    expect(error?.permanent).toBeUndefined();
    const watches = new MemoryWatchStore();
    expect(await watchRun(unverified, watches, 'customer@example.org')).toMatchObject({
      sent: 0,
      failures: 1,
    });
    expect(watches.outbox.size).toBe(1);
    unverified.verify(policies.email.identity);
    expect(await watchRun(unverified, watches)).toMatchObject({ sent: 1, failures: 0 });
    expect(watches.outbox.size).toBe(0);
  });
});
