/**
 * The sign-up counters of the dashboard's pre-sign-up trigger (functions/sign-up-guard/), in the
 * dashboard table, through the wire as the store's other calls. Items, keyed by `id`:
 * - `signup#h#<YYYY-MM-DDTHH>`: the sign-ups of one UTC hour;
 * - `signup#d#<YYYY-MM-DD>`: of one UTC day;
 * - `signup#d#<YYYY-MM-DD>#<domain>`: of one UTC day for one e-mail domain;
 * each `n` (N) and `expiresAt` (the table's TTL attribute: a day after its window ends).
 *
 * One sign-up is one transaction of the three counters' updates, each conditioned on its count being
 * below its cap: all three counted, or none (a refused sign-up uses none of the others' allowance),
 * and two sign-ups at once never both take the last place (one's condition fails). A transaction
 * cancelled by a conflict with another sign-up's is tried again a few times with jittered backoff,
 * then refused (the safe side).
 */

import { DashboardTablePart } from './dashboard.js';
import { N, S } from './items.js';
import { cancellationReasons } from './store-db.js';

export interface SignUpCaps {
  perHour: number;
  perDay: number;
  perDomainPerDay: number;
}

export type SignUpLimit = 'hour' | 'day' | 'domain';
export type SignUpVerdict = { admitted: true } | { admitted: false; limit: SignUpLimit };

const DAY_SECONDS = 86_400;
const ATTEMPTS = 6;
const BACKOFF_BASE_MS = 20;

export class SignUpCounters extends DashboardTablePart {
  /** Counts one sign-up from `domain` at `now`, unless a cap is reached. */
  async admit(domain: string, now: Date, caps: SignUpCaps): Promise<SignUpVerdict> {
    const iso = now.toISOString();
    const hour = iso.slice(0, 13);
    const day = iso.slice(0, 10);
    const dayEnd = Math.floor(Date.parse(`${day}T00:00:00Z`) / 1000) + DAY_SECONDS;
    const counters: { id: string; cap: number; expiresAt: number; limit: SignUpLimit }[] = [
      {
        id: `signup#h#${hour}`,
        cap: caps.perHour,
        expiresAt: Math.floor(Date.parse(`${hour}:00:00Z`) / 1000) + 3_600 + DAY_SECONDS,
        limit: 'hour',
      },
      { id: `signup#d#${day}`, cap: caps.perDay, expiresAt: dayEnd + DAY_SECONDS, limit: 'day' },
      {
        id: `signup#d#${day}#${domain}`,
        cap: caps.perDomainPerDay,
        expiresAt: dayEnd + DAY_SECONDS,
        limit: 'domain',
      },
    ];
    for (let attempt = 1; ; attempt++) {
      const verdict = await this.attempt(counters);
      if (verdict !== 'conflict') return verdict;
      if (attempt >= ATTEMPTS) return { admitted: false, limit: 'hour' };
      await new Promise((resolve) => setTimeout(resolve, Math.random() * BACKOFF_BASE_MS * 2 ** attempt));
    }
  }

  private async attempt(
    counters: { id: string; cap: number; expiresAt: number; limit: SignUpLimit }[],
  ): Promise<SignUpVerdict | 'conflict'> {
    try {
      await this.wire.call('TransactWriteItems', {
        TransactItems: counters.map((counter) => ({
          Update: {
            TableName: this.name(),
            Key: { id: S(counter.id) },
            UpdateExpression: 'SET expiresAt = if_not_exists(expiresAt, :expires) ADD n :one',
            ConditionExpression: 'attribute_not_exists(n) OR n < :cap',
            ExpressionAttributeValues: {
              ':one': N(1),
              ':cap': N(counter.cap),
              ':expires': N(counter.expiresAt),
            },
          },
        })),
      });
      return { admitted: true };
    } catch (error) {
      const reasons = cancellationReasons(error);
      if (!reasons) throw error;
      const full = reasons.findIndex((reason) => reason.Code === 'ConditionalCheckFailed');
      if (full >= 0) return { admitted: false, limit: counters[full]?.limit ?? 'hour' };
      if (reasons.some((reason) => reason.Code === 'TransactionConflict')) return 'conflict';
      throw error;
    }
  }
}
