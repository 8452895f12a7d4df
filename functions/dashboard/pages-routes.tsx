/** @jsxImportSource hono/jsx */
/**
 * A signed-in customer's pages: Settings → API (keys), Billing, Activity (activity-routes.tsx), Members
 * and the audit log (team-routes.tsx, audit-routes.tsx). Every one needs a live session (a GET without
 * one goes to sign-in; a POST is refused), a member of its account (read at each request) whose role
 * has the route's permission (team-access.tsx), and acts on the session's account only.
 */
import { type Context, Hono } from 'hono';
import { hashKey } from '../core/auth.js';
import { type KeyRecord, topUpEntryId } from '../core/store.js';
import { autoTopUpChangedMessage, keyCreatedMessage } from '../core/watch.js';
import {
  alertThresholdCents,
  autoTopUpCents,
  InvalidPurchaseAmountError,
  purchaseCentsFromDollars,
} from '../payments/amounts.js';
import { createCheckout, createSaveCardCheckout } from '../payments/checkout.js';
import { paymentReference } from '../payments/events.js';
import type { CheckoutSessionStatus } from '../payments/stripe-api.js';
import { logger } from '../shared/observability.js';
import { createAccountKey, KeyRequestError, renameAccountKey, revokeAccountKey } from './accounts.js';
import { activityRoutes } from './activity-routes.js';
import { auditRoutes } from './audit-routes.js';
import { billingDocumentRoutes } from './billing-documents.js';
import { BillingPage, SuccessPage } from './billing-pages.js';
import type { DashboardDeps, DashboardEnv } from './deps.js';
import { keyCapRoute, keysPage } from './keys-page.js';
import { MessagePage } from './pages.js';
import { redirectAfterPost, signedInRecently, takeNotice } from './sessions.js';
import { auditOf, signedInMember } from './team-access.js';
import { teamRoutes } from './team-routes.js';

/** The buy buttons, in cents: $10, $25, $50, $100 (any other amount is the custom field's). */
const FIXED_AMOUNTS_CENTS = [1_000, 2_500, 5_000, 10_000] as const;

/** The billing page: where the API's 402 `topUpUrl` points. */
const BILLING_PATH = '/dashboard/billing';
/** Settings → API: the keys. */
const KEYS_PATH = '/dashboard/settings/api';

/** The amount a buy form asked for, in cents; throws InvalidPurchaseAmountError with the customer's message. */
function requestedCents(form: Record<string, unknown>): number {
  const amount = form.amount;
  if (amount === 'custom')
    return purchaseCentsFromDollars(typeof form.custom === 'string' ? form.custom : '');
  const fixed = FIXED_AMOUNTS_CENTS.find((cents) => String(cents) === amount);
  if (fixed === undefined)
    throw new InvalidPurchaseAmountError('Choose one of the amounts, or type another.');
  return fixed;
}

/** What an audit entry says of a key (never its text): its prefix and name. */
const keyFacts = (key: KeyRecord) => ({ prefix: key.displayPrefix, name: key.name });

const noSuchKey = (c: Context) =>
  c.html(
    <MessagePage title="Not found" message="There is no such key on your account." signedIn={true} />,
    404,
  );

export function customerRoutes(deps: DashboardDeps, now: () => Date): Hono<DashboardEnv> {
  const { store } = deps;
  const routes = new Hono<DashboardEnv>();

  const gate = signedInMember(store, now);
  for (const path of [
    '/settings/*',
    '/billing',
    '/billing/*',
    '/activity',
    '/activity.csv',
    '/switch-account',
  ])
    routes.use(path, gate);

  // Creating a key or changing auto top-up (each can spend money: a key spends the balance, auto
  // top-up charges the card) needs a recent sign-in (signedInRecently): else nothing is done and the
  // browser signs in again, then comes back to the page (GET) to do it again. The POST is not replayed.
  for (const [path, page] of [
    ['/settings/api/keys', KEYS_PATH],
    ['/billing/auto-top-up', BILLING_PATH],
  ] as const)
    routes.post(path, async (c, next) => {
      if (signedInRecently(c.var.session, now())) return next();
      return c.redirect(`/dashboard/sign-in?fresh=${encodeURIComponent(page)}`, 303);
    });

  const accountOf = async (accountId: string) => {
    const account = await store.getAccount(accountId);
    if (!account) throw new Error(`the session's account ${accountId} is gone`);
    return account;
  };

  // Per-key daily caps are off unless the deploy turns them on: then only is a cap shown or set.
  // Every POST that changes something answers 303 to the page that shows it (redirectAfterPost); one
  // refused for its input (nothing written) shows the form again with why (400 or 409).
  const caps = deps.keyDailyCaps === true;
  routes.get('/settings/api', async (c) => {
    const { session } = c.var;
    const notice = await takeNotice(store, session, now());
    const changedHash = notice?.created ? hashKey(notice.created.key) : notice?.changedKeyHash;
    const changed = changedHash ? await store.getKey(changedHash) : undefined;
    return c.html(
      await keysPage(store, session.accountId, now(), caps, {
        ...(changed?.accountId === session.accountId ? { changed } : {}),
        ...(notice?.created ? { created: notice.created } : {}),
      }),
    );
  });
  if (caps) keyCapRoute(routes, store, now);

  routes.post('/settings/api/keys', async (c) => {
    const { accountId, subject } = c.var.session;
    const form = await c.req.parseBody();
    try {
      const at = now().toISOString();
      const { key, record } = await createAccountKey(store, accountId, form.name, at, {
        by: { subject: c.var.member.subject, ...(c.var.member.email ? { email: c.var.member.email } : {}) },
        audit: (made) => auditOf(c, 'key.created', at, { target: made.keyId, details: keyFacts(made) }),
      });
      // Told to the signed-in user's address: the key is made (another table), so right after it.
      const to = await deps.watches?.emailOf(subject);
      if (to) await deps.watches?.queueMessage(accountId, keyCreatedMessage(to, record.name, at), at);
      return redirectAfterPost(c, store, c.var.session, KEYS_PATH, now(), {
        created: { name: record.name, key },
      });
    } catch (error) {
      if (!(error instanceof KeyRequestError)) throw error;
      return c.html(await keysPage(store, accountId, now(), caps, { error: error.message }), error.status);
    }
  });

  routes.post('/settings/api/keys/:keyId/revoke', async (c) => {
    const { accountId } = c.var.session;
    const at = now().toISOString();
    const revoked = await revokeAccountKey(store, accountId, c.req.param('keyId'), at, {
      audit: (key) => auditOf(c, 'key.revoked', at, { target: key.keyId, details: keyFacts(key) }),
    });
    if (!revoked) return noSuchKey(c);
    return redirectAfterPost(c, store, c.var.session, KEYS_PATH, now(), { changedKeyHash: revoked.keyHash });
  });

  routes.post('/settings/api/keys/:keyId/rename', async (c) => {
    const { accountId } = c.var.session;
    const form = await c.req.parseBody();
    const at = now().toISOString();
    let renamed: Awaited<ReturnType<typeof renameAccountKey>>;
    try {
      renamed = await renameAccountKey(store, accountId, c.req.param('keyId'), form.name, {
        audit: (key) =>
          auditOf(c, 'key.renamed', at, {
            target: key.keyId,
            details: { ...keyFacts(key), name: `${key.name} -> ${String(form.name).trim()}` },
          }),
      });
    } catch (error) {
      if (!(error instanceof KeyRequestError)) throw error;
      return c.html(await keysPage(store, accountId, now(), caps, { error: error.message }), error.status);
    }
    if (!renamed) return noSuchKey(c);
    return redirectAfterPost(c, store, c.var.session, KEYS_PATH, now(), { changedKeyHash: renamed.keyHash });
  });

  const { watches } = deps;
  const billingPage = async (
    accountId: string,
    extra: { error?: string; custom?: string; watchError?: string } = {},
  ) => {
    const [account, history, watch] = await Promise.all([
      accountOf(accountId),
      store.listCreditHistory(accountId),
      watches?.getWatch(accountId),
    ]);
    return (
      <BillingPage
        account={account}
        history={history}
        fixedCents={FIXED_AMOUNTS_CENTS}
        watch={watch}
        watchEnabled={watches !== undefined}
        {...extra}
      />
    );
  };
  const formText = (form: Record<string, unknown>, name: string) =>
    typeof form[name] === 'string' ? (form[name] as string).slice(0, 40) : '';

  routes.get('/billing', async (c) => c.html(await billingPage(c.var.session.accountId)));

  routes.post('/billing/checkout', async (c) => {
    const { accountId } = c.var.session;
    const form = await c.req.parseBody();
    let cents: number;
    try {
      cents = requestedCents(form);
    } catch (error) {
      if (!(error instanceof InvalidPurchaseAmountError)) throw error;
      const custom = typeof form.custom === 'string' ? form.custom.slice(0, 40) : '';
      return c.html(await billingPage(accountId, { error: error.message, custom }), 400);
    }
    const session = await createCheckout(await deps.stripe(), {
      accountId,
      amountCents: cents,
      customer: (await watches?.getWatch(accountId))?.autoTopUp?.customer,
      remembered: { store, now: now().toISOString() },
      successUrl: `${deps.publicOrigin}${BILLING_PATH}/success?session_id={CHECKOUT_SESSION_ID}`,
      cancelUrl: `${deps.publicOrigin}${BILLING_PATH}`,
    });
    return c.redirect(session.url, 303);
  });

  // The low-balance alert: a threshold in dollars (empty: off), e-mailed to the signed-in user.
  routes.post('/billing/alert', async (c) => {
    const { accountId, subject } = c.var.session;
    if (!watches) return c.notFound();
    const typed = formText(await c.req.parseBody(), 'threshold').trim();
    let cents: number | undefined;
    try {
      cents = typed === '' ? undefined : alertThresholdCents(typed);
    } catch (error) {
      if (!(error instanceof InvalidPurchaseAmountError)) throw error;
      return c.html(await billingPage(accountId, { watchError: error.message }), 400);
    }
    const at = now().toISOString();
    const threshold = cents === undefined ? 'off' : `$${(cents / 100).toFixed(2)}`;
    // The entry in the same transaction as the watch item's change.
    const audit = auditOf(c, 'alert.changed', at, { details: { threshold } });
    await watches.setAlert(accountId, cents, await watches.emailOf(subject), at, audit);
    return redirectAfterPost(c, store, c.var.session, BILLING_PATH, now());
  });

  // Auto top-up: "when below $X, buy $Y" (bounds checked here) and its switch; on only with a card.
  routes.post('/billing/auto-top-up', async (c) => {
    const { accountId, subject } = c.var.session;
    if (!watches) return c.notFound();
    const form = await c.req.parseBody();
    let settings: { belowCents: number; buyCents: number };
    try {
      settings = autoTopUpCents(formText(form, 'below'), formText(form, 'buy'));
    } catch (error) {
      if (!(error instanceof InvalidPurchaseAmountError)) throw error;
      return c.html(await billingPage(accountId, { watchError: error.message }), 400);
    }
    const enabled = form.enabled === 'on';
    if (enabled && !(await watches.getWatch(accountId))?.autoTopUp?.paymentMethod)
      return c.html(
        await billingPage(accountId, {
          watchError: 'Save a card first: auto top-up charges the saved card.',
        }),
        400,
      );
    const email = await watches.emailOf(subject);
    const at = now().toISOString();
    const changed = { ...settings, enabled };
    // The change told to the account's address in the same write.
    const message = email ? autoTopUpChangedMessage(email, changed, at) : undefined;
    const details = {
      enabled: String(enabled),
      below: `$${(settings.belowCents / 100).toFixed(2)}`,
      buy: `$${(settings.buyCents / 100).toFixed(2)}`,
    };
    // The entry in the same transaction as the change and its e-mail.
    const audit = auditOf(c, 'auto_top_up.changed', at, { details });
    await watches.setAutoTopUp(accountId, changed, email, at, message, audit);
    return redirectAfterPost(c, store, c.var.session, BILLING_PATH, now());
  });

  // Saving a card: Checkout for an amount (credited as any purchase) that keeps the card for later.
  routes.post('/billing/auto-top-up/card', async (c) => {
    const { accountId } = c.var.session;
    if (!watches) return c.notFound();
    let cents: number;
    try {
      cents = purchaseCentsFromDollars(formText(await c.req.parseBody(), 'buy'));
    } catch (error) {
      if (!(error instanceof InvalidPurchaseAmountError)) throw error;
      return c.html(await billingPage(accountId, { watchError: error.message }), 400);
    }
    // The Customer its card was saved to before, if any (checkout.ts takes the one remembered first):
    // one Customer per account.
    const customer = (await watches.getWatch(accountId))?.autoTopUp?.customer;
    const session = await createSaveCardCheckout(await deps.stripe(), {
      accountId,
      amountCents: cents,
      customer,
      remembered: { store, now: now().toISOString() },
      successUrl: `${deps.publicOrigin}${BILLING_PATH}/success?session_id={CHECKOUT_SESSION_ID}`,
      cancelUrl: `${deps.publicOrigin}${BILLING_PATH}`,
    });
    return c.redirect(session.url, 303);
  });

  // Shows the balance as it is: only the webhook credits (functions/payments/), never this page. Until
  // the session's payment is in the ledger (its top-up `stripe:<PaymentIntent>`), the page says the
  // payment is being confirmed rather than show a balance without it.
  routes.get('/billing/success', async (c) => {
    const { accountId } = c.var.session;
    const sessionId = c.req.query('session_id') ?? '';
    const [account, history, checkout] = await Promise.all([
      accountOf(accountId),
      store.listCreditHistory(accountId),
      /^cs_[0-9A-Za-z_]{1,200}$/.test(sessionId)
        ? deps
            .stripe()
            .then((stripe) => stripe.retrieveCheckoutSession(sessionId))
            // Not read (Stripe unreachable): not known to be credited, so said to be confirming.
            .catch((error: unknown): CheckoutSessionStatus => {
              logger.warn('dashboard: checkout session not read', { error });
              return { id: sessionId, accountId };
            })
        : undefined,
    ]);
    const ours = checkout?.accountId === accountId ? checkout : undefined;
    const reference = ours?.paymentIntent && topUpEntryId(paymentReference(ours.paymentIntent));
    const confirming = ours !== undefined && !history.some((entry) => entry.entryId === reference);
    return c.html(
      <SuccessPage
        account={account}
        history={history}
        {...(confirming ? { confirming: { sessionId, amountCents: ours.amountTotal } } : {})}
      />,
    );
  });

  activityRoutes(routes, store, now);
  teamRoutes(routes, deps, now);
  auditRoutes(routes, store);
  billingDocumentRoutes(routes, deps, now);
  return routes;
}
