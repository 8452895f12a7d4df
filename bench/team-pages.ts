/**
 * `npx tsx bench/team-pages.ts`: the server time of the dashboard's team pages (Settings → Members,
 * Settings → Audit log, its filtered view and CSV) beside Settings → API and the Overview, for a
 * typical team account, on DynamoDB Local (in memory) through the DynamoDB store.
 *
 * - The account: its owner (a first sign-in's `addFirstOwner`), BENCH_TEAM_MEMBERS more members
 *   (default 7, of every role) who joined through invitations (`createInvitation` and
 *   `acceptInvitation`, as the pages make them), 3 invitations pending, 10 keys, and
 *   BENCH_TEAM_AUDIT audit entries (default 300, what a busy team writes in months) appended.
 * - Its billing: a Stripe Customer (made and remembered as Checkout makes it) with a profile (name,
 *   address, a VAT ID, PO number) and 12 paid invoices, on the Stripe stand-in (lib/local/stripe) at
 *   no added latency, for the Billing profile and Invoices pages: each is the page's own work plus
 *   its Stripe calls (1 and 1: the remembered Customer retrieved with its tax IDs; its invoices
 *   listed), and in AWS each of those calls is a round trip to api.stripe.com.
 * - Each page through the dashboard's Hono app in process (`app.request`), a session put through the
 *   store's `putSession` and sent in its cookie: what is timed is the server's work, the session and
 *   member reads, every DynamoDB call of the page (over HTTP to DynamoDB Local) and the rendering, to
 *   the last byte of the body. 3 warm-ups, then 30 rounds, the pages in turn; p50 and p99 (of 30: the
 *   slowest but none). Exits 1 if a page answers other than 200. The target: p50 at most 50 ms.
 */
import { createHash, randomBytes } from 'node:crypto';
import { DynamoStore } from '../functions/adapters/dynamodb/index.js';
import { auditEntry, INVITATION_TTL_SECONDS, type Role } from '../functions/core/team.js';
import { createDashboardApp } from '../functions/dashboard/app.js';
import { hashSessionId, SESSION_COOKIE } from '../functions/dashboard/sessions.js';
import { ensureAccountCustomer } from '../functions/payments/account-customer.js';
import { stripeApi, stripeClient } from '../functions/payments/stripe-api.js';
import { createKey } from '../lib/admin/operations.js';
import {
  ensureDashboardTable,
  ensureTables,
  ensureTeamTables,
  localClient,
  startDynamoLocal,
} from '../lib/local/dynamodb-local.js';
import { startStripeStandIn } from '../lib/local/stripe/index.js';
import {
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TABLE_NAMES,
  LOCAL_TEAM_TABLE_NAME,
} from '../lib/tables.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const MEMBERS = Number(process.env.BENCH_TEAM_MEMBERS ?? 7);
const AUDIT = Number(process.env.BENCH_TEAM_AUDIT ?? 300);
const WARMUPS = 3;
const RUNS = 30;
const TARGET_P50_MS = 50;
const ROLES: Role[] = ['admin', 'billing', 'developer', 'developer', 'viewer', 'viewer', 'developer'];

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((sorted.length * p) / 100) - 1)] ?? Number.NaN;

async function main() {
  const dynamo = await startDynamoLocal();
  const client = localClient(dynamo.endpoint);
  await ensureTables(client, { ...LOCAL_TABLE_NAMES });
  await ensureDashboardTable(client, LOCAL_DASHBOARD_TABLE_NAME);
  await ensureTeamTables(client, { team: LOCAL_TEAM_TABLE_NAME, audit: LOCAL_AUDIT_TABLE_NAME });
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  const store = new DynamoStore(client, { ...LOCAL_TABLE_NAMES });
  const now = new Date();
  const at = (offsetMs: number) => new Date(now.getTime() - offsetMs).toISOString();
  const accountId = `acct-${randomBytes(12).toString('hex')}`;
  const owner = { subject: 'bench-owner', email: 'owner@bench.example' };
  const actor = { kind: 'member' as const, ...owner };

  await store.createAccount(accountId, 25_000_000_000n, at(90 * 86_400_000));
  await store.addFirstOwner(
    { accountId, ...owner, role: 'owner', joinedAt: at(90 * 86_400_000) },
    auditEntry(accountId, actor, 'member.joined', at(90 * 86_400_000), { target: owner.email }),
  );
  const invite = async (email: string, role: Role, when: string) => {
    const token = randomBytes(32).toString('base64url');
    const invitation = {
      accountId,
      invitationId: `inv_${randomBytes(12).toString('hex')}`,
      tokenHash: createHash('sha256').update(token).digest('hex'),
      email,
      role,
      invitedBy: owner.subject,
      createdAt: when,
      expiresAt: Math.floor(now.getTime() / 1000) + INVITATION_TTL_SECONDS,
    };
    await store.createInvitation(
      invitation,
      auditEntry(accountId, actor, 'member.invited', when, { target: email }),
    );
    return { invitation, token };
  };
  for (let i = 0; i < MEMBERS; i++) {
    const email = `member${i + 1}@bench.example`;
    const when = at((80 - i) * 86_400_000);
    const { invitation, token } = await invite(email, ROLES[i % ROLES.length] as Role, when);
    const person = { subject: `bench-member-${i + 1}`, email };
    await store.acceptInvitation(
      accountId,
      invitation.invitationId,
      createHash('sha256').update(token).digest('hex'),
      person,
      when,
      auditEntry(accountId, { kind: 'member', ...person }, 'member.joined', when, { target: email }),
    );
  }
  for (let i = 0; i < 3; i++) await invite(`pending${i + 1}@bench.example`, 'viewer', at(i * 3_600_000));
  for (let i = 0; i < 10; i++) await createKey({ store }, accountId, `key ${i + 1}`);
  for (let i = 0; i < AUDIT; i++)
    await store.appendAudit(
      auditEntry(accountId, actor, i % 3 === 0 ? 'key.created' : 'alert.changed', at(i * 600_000 + 1), {
        target: `key_${i}`,
        details: { name: `entry ${i}` },
        ip: '203.0.113.7',
        userAgent: 'Mozilla/5.0 (bench)',
      }),
    );

  // Billing: the account's Customer, its profile and a year of monthly top-ups' paid invoices.
  const standIn = await startStripeStandIn();
  const stripe = stripeApi(stripeClient({ apiKey: standIn.apiKey, apiBase: standIn.url }));
  const invoicing = stripe.invoicing;
  if (!invoicing) throw new Error('the Stripe API has no invoicing');
  const customer = await ensureAccountCustomer(invoicing, {
    accountId,
    remembered: { store, now: now.toISOString() },
  });
  await invoicing.saveProfile(customer, accountId, {
    legalName: 'Bench Widgets GmbH',
    contacts: ['billing@bench.example', 'ap@bench.example'],
    address: { line1: 'Hauptstraße 1', postalCode: '10115', city: 'Berlin', country: 'DE' },
    taxIds: [{ type: 'eu_vat', value: 'DE123456789' }],
    poNumber: 'PO-4711',
  });
  for (let i = 0; i < 12; i++)
    await invoicing.invoicePayment({
      customer,
      accountId,
      paymentIntent: `pi_bench_${i}`,
      amountCents: 5_000,
      description: 'API credits',
    });

  const app = createDashboardApp({
    store,
    oidc: () => Promise.reject(new Error('the bench signs in through the session store')),
    stripe: async () => stripe,
    publicOrigin: 'http://127.0.0.1',
    checkoutOrigins: [],
    originVerify: async () => [],
    now: () => now,
  });
  const id = randomBytes(32).toString('base64url');
  await store.putSession({
    sessionHash: hashSessionId(id),
    accountId,
    subject: owner.subject,
    createdAt: now.toISOString(),
    expiresAt: Math.floor(now.getTime() / 1000) + 12 * 3600,
  });
  const cookie = `${SESSION_COOKIE}=${id}`;
  const pages = [
    { label: 'Settings → Members', path: '/dashboard/settings/members' },
    { label: 'Settings → Audit log (first page)', path: '/dashboard/settings/audit' },
    {
      label: 'Audit log, filtered (action, member, dates)',
      path: '/dashboard/settings/audit?action=key.created&member=bench-owner&from=2020-01-01',
    },
    { label: 'Audit log CSV (first page)', path: '/dashboard/settings/audit.csv' },
    { label: 'Settings → API (keys)', path: '/dashboard/settings/api' },
    { label: 'Overview', path: '/dashboard/' },
    { label: 'Activity', path: '/dashboard/activity' },
    { label: 'Billing', path: '/dashboard/billing' },
    { label: 'Billing profile (1 Stripe call)', path: '/dashboard/billing/profile' },
    { label: 'Invoices, 12 (1 Stripe call)', path: '/dashboard/billing/invoices' },
    {
      label: 'Monthly statement (this month)',
      path: `/dashboard/billing/statement/${new Date().toISOString().slice(0, 7)}`,
    },
  ];
  const times = new Map<string, number[]>(pages.map((p) => [p.path, []]));
  let failed = false;
  for (let round = 0; round < WARMUPS + RUNS; round++)
    for (const page of pages) {
      const t0 = performance.now();
      const response = await app.request(page.path, { headers: { cookie } });
      await response.text();
      const elapsed = performance.now() - t0;
      if (response.status !== 200) {
        failed = true;
        console.log(`${page.path} answered ${response.status}`);
      }
      if (round >= WARMUPS) times.get(page.path)?.push(elapsed);
    }
  console.log(
    `Typical team account: ${MEMBERS + 1} members, 3 pending invitations, 10 keys, ${AUDIT + 2 * MEMBERS + 4} audit entries; DynamoDB Local in memory; Node ${process.version}; ${WARMUPS} warm-ups, ${RUNS} rounds.`,
  );
  console.log('');
  console.log('| page | p50 ms | p99 ms |');
  console.log('| --- | ---: | ---: |');
  for (const page of pages) {
    const sorted = (times.get(page.path) ?? []).sort((a, b) => a - b);
    const p50 = percentile(sorted, 50);
    if (p50 > TARGET_P50_MS) console.log(`(over the ${TARGET_P50_MS} ms target)`);
    console.log(`| ${page.label} | ${p50.toFixed(1)} | ${percentile(sorted, 99).toFixed(1)} |`);
  }
  client.destroy();
  await standIn.close();
  await dynamo.stop();
  if (failed) process.exitCode = 1;
}

await main();
