/**
 * An account with people on it, for the team tests: its owner signed in (their first sign-in made it),
 * and others joined through the Members page's invitation and its accept flow, each in a browser of
 * their own.
 */
import type { Role } from '../../../functions/core/team.js';
import type { Browser } from '../../support/browser.js';
import { MemoryWatchStore } from '../../support/memory-watch.js';
import { accountOf, dashboard, ORIGIN } from './support.js';

const LINK = /value="(https:\/\/dashboard\.example\.com\/dashboard\/invite\/[^"]+)"/;

export async function teamDashboard(options: { keyDailyCaps?: boolean } = {}) {
  const watches = new MemoryWatchStore();
  const d = dashboard({ watches, ...options });
  const owner = d.browser();
  await d.signIn(owner, 'owner-1');
  const accountId = accountOf(d.store, 'owner-1');

  /** Invites `email` as `role` from `by`'s browser; the link the page shows the inviter. */
  async function invite(by: Browser, email: string, role: Role): Promise<string> {
    const sent = await d.post(by, '/dashboard/settings/members/invite', { email, role });
    if (sent.status !== 303) throw new Error(`invite: ${sent.status} ${await sent.text()}`);
    const page = await d.get(by, '/dashboard/settings/members');
    const link = LINK.exec(page.body)?.[1];
    if (!link) throw new Error('no invitation link on the page');
    return link.replaceAll('&amp;', '&');
  }

  /** `subject` joins the owner's account as `role` (invited by the owner): their browser, signed in there. */
  async function join(subject: string, role: Role, b: Browser = d.browser()): Promise<Browser> {
    const link = await invite(owner, `${subject}@example.com`, role);
    const accepted = await d.accept(b, link, subject);
    if (accepted.status !== 303) throw new Error(`accept: ${accepted.status} ${await accepted.text()}`);
    return b;
  }

  /** The key the owner made ('k1'): its id. */
  async function ownerKey(name = 'k1'): Promise<string> {
    await d.post(owner, '/dashboard/settings/api/keys', { name });
    const key = (await d.store.listKeys(accountId)).find((k) => k.name === name);
    if (!key) throw new Error('no key');
    return key.keyId;
  }

  /** Everything a refused request must leave as it was, as one comparable text. */
  async function snapshot(): Promise<string> {
    const state = {
      members: await d.store.listMembers(accountId),
      invitations: await d.store.listInvitations(accountId, 0),
      audit: (await d.store.listAudit(accountId, { limit: 1000 })).entries,
      keys: await d.store.listKeys(accountId),
      watch: await watches.getWatch(accountId),
      outbox: [...watches.outbox.keys()],
      checkouts: d.stripe.sessions.length,
    };
    return JSON.stringify(state, (_key, value) => (typeof value === 'bigint' ? `${value}n` : value));
  }

  return { ...d, watches, owner, accountId, invite, join, ownerKey, snapshot, ORIGIN };
}
