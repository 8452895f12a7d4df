import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccountStatus } from '../../functions/core/access.js';
import { setAccountStatus } from '../../lib/admin/operations.js';
import { completeOnce } from '../support/busy-load.js';
import { newAccount, startTarget, type Target } from '../support/target.js';

/**
 * The status of an account split into slices, written by operator commands that run at the same
 * time (a suspension and a reinstatement, a reinstatement and a ban) and beside a split: whatever
 * the order their writes land in, every slice ends with the status the account item ends with, and a
 * banned account is refused on whichever slice a request draws.
 */
let target: Target;
beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
});

const STATUSES: AccountStatus[] = ['active', 'suspended', 'banned'];

/** The status of every slice item (index = slice), read directly and strongly consistently. */
async function sliceStatuses(accountId: string, slices: number): Promise<(string | undefined)[]> {
  return Promise.all(
    Array.from({ length: slices }, async (_, slice) => {
      const out = await target.client.send(
        new GetItemCommand({
          TableName: target.tables.accounts,
          Key: { accountId: { S: slice === 0 ? accountId : `${accountId}#${slice}` } },
          ConsistentRead: true,
        }),
      );
      return out.Item?.status?.S;
    }),
  );
}

/** Slices whose status differs from the account item's (slice 0), as `<slice>:<status>`. */
function disagreeing(statuses: (string | undefined)[]): string[] {
  return statuses.flatMap((status, slice) => (status === statuses[0] ? [] : [`${slice}:${status}`]));
}

async function splitAccount(credits: string, slices: number) {
  const account = await newAccount(target, credits);
  await target.admin.store.splitAccount(account.accountId, slices);
  return account;
}

describe('two status commands at once on a split account', () => {
  it('leave every slice with the status the account item ends with, whatever their interleaving', async () => {
    const slices = 16;
    const { accountId } = await splitAccount('1', slices);
    const wrong: string[] = [];
    for (let round = 0; round < 30; round++) {
      const first = STATUSES[round % 3] ?? 'active';
      const second = STATUSES[(round + 1 + Math.floor(Math.random() * 2)) % 3] ?? 'banned';
      await Promise.all([
        setAccountStatus(target.admin, accountId, first),
        setAccountStatus(target.admin, accountId, second),
      ]);
      const statuses = await sliceStatuses(accountId, slices);
      expect([first, second]).toContain(statuses[0]);
      const off = disagreeing(statuses);
      if (off.length > 0) wrong.push(`round ${round} (${first} | ${second}), account ${statuses[0]}: ${off}`);
    }
    expect(wrong).toEqual([]);
  }, 120_000);

  it('converge with a split that runs beside them, on the new slices as on the old', async () => {
    const { accountId } = await splitAccount('1', 2);
    const wrong: string[] = [];
    for (let round = 1; round <= 12; round++) {
      const slices = 2 + 4 * round;
      const first = STATUSES[round % 3] ?? 'active';
      const second = STATUSES[(round + 1) % 3] ?? 'banned';
      await Promise.all([
        target.admin.store.splitAccount(accountId, slices),
        setAccountStatus(target.admin, accountId, first),
        setAccountStatus(target.admin, accountId, second),
      ]);
      const statuses = await sliceStatuses(accountId, slices);
      expect(statuses.every((status) => status !== undefined)).toBe(true);
      const off = disagreeing(statuses);
      if (off.length > 0) wrong.push(`round ${round} (${first} | ${second}), account ${statuses[0]}: ${off}`);
    }
    expect(wrong).toEqual([]);
  }, 120_000);
});

describe('a split account banned while it is being reinstated', () => {
  it('is refused on every slice once the ban is the last command, never served', async () => {
    const slices = 16;
    const { accountId, key } = await splitAccount('5', slices);
    let bannedRounds = 0;
    const served: string[] = [];
    for (let round = 0; round < 20 && bannedRounds < 4; round++) {
      const pair: AccountStatus[] = round % 2 === 0 ? ['active', 'banned'] : ['banned', 'active'];
      await Promise.all(pair.map((status) => setAccountStatus(target.admin, accountId, status)));
      const [status] = await sliceStatuses(accountId, 1);
      if (status !== 'banned') continue;
      bannedRounds += 1;
      // 48 requests over 16 slices drawn at random: each slice is drawn about three times.
      const answers = await Promise.all(
        Array.from({ length: 48 }, (_, i) => completeOnce(target, key, i, true)),
      );
      const statuses = answers.map((a) => a.status);
      if (statuses.some((s) => s !== 403))
        served.push(`round ${round}: ${statuses.filter((s) => s !== 403)}`);
    }
    expect(bannedRounds).toBeGreaterThan(0);
    expect(served).toEqual([]);
  }, 180_000);
});
