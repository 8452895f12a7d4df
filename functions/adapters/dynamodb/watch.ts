/**
 * The balance watch's items in the dashboard table (the WatchStore port, functions/core/watch.ts),
 * through the wire as the rest of the store's calls. Built from the same Db as the store's parts
 * (`new WatchItems({ client, tables, wire })` of a DynamoStore): by the balance-watch function, the
 * payments webhook (a saved card, a top-up's outcome) and the dashboard (the settings).
 *
 * Items, keyed by `id`:
 * - `watch#<accountId>`: watchList = `watch` (GSI watchList: listed without a scan), accountId, email;
 *   the alert (thresholdCents N, alertState S `armed`|`sent`, alertSeq N); the auto top-up (autoBelowCents,
 *   autoBuyCents N, autoEnabled BOOL, stripeCustomer, paymentMethod, cardBrand, cardLast4, cardFrom N,
 *   autoOffReason, autoOffAt); topUpSeq N and the one in flight (inFlightSeq N, inFlightAt, inFlightIntent);
 *   levelsAt (S: when its levels were last copied onto the account's items, watch-copy.ts).
 * - `outbox#<accountId>#alert-<n>` / `#topup-<n>` / `#change-<uuid>` (a key created, auto top-up
 *   changed): watchList = `outbox`, accountId, to, subject, text, createdAt; claimedUntil N (epoch ms)
 *   while a run sends it, sendAttempts N (one per claim). Put in the same transaction as the
 *   transition that queues it (a key's, made in another table, right after it); deleted once SES took it. A dead letter
 *   (SES refused it for good, or too many attempts failed) is the same item listed as watchList =
 *   `dead-letter`, with deadReason and deadAt: out of the outbox, never sent again.
 * - `profile#<OpenID subject>`: email (the ID token's at the last sign-in), updatedAt.
 * - `watch-sweep`: sweepAfter (S, the account id the next safety sweep goes on after; absent: the start), updatedAt.
 *
 * A change of the settings then copies the levels they set onto the account's items in the accounts
 * table (watch-copy.ts), which the balance watch's stream filter compares the balance with.
 *
 * Each transition is one conditional write (or one transaction of the watch item's update and the
 * outbox item's put): two writers with the same view, one wins, the other's condition fails. The
 * outbox's own operations (listing, claiming, dead-lettering, deleting) are in watch-outbox.ts.
 */
import { randomUUID } from 'node:crypto';
import type { GetItemCommandOutput, QueryCommandOutput } from '@aws-sdk/client-dynamodb';
import type { AuditEntry } from '../../core/team.js';
import {
  alertMessageId,
  changeMessageId,
  type NewMessage,
  type SavedCard,
  topUpMessageId,
  type Watch,
  type WatchStore,
} from '../../core/watch.js';
import { watchLevels } from '../../core/watch-levels.js';
import { withAudit } from './audit.js';
import { type Item, N, S } from './items.js';
import { DASHBOARD_TABLE_ENV, INDEX } from './schema.js';
import { copyWatchLevels } from './watch-copy.js';
import { outboxItem, settingsUpdate, toWatch } from './watch-item.js';
import { failedCondition, WatchOutbox } from './watch-outbox.js';

const watchId = (accountId: string) => `watch#${accountId}`;
const profileId = (subject: string) => `profile#${subject}`;
/** Where the balance watch's safety sweep stopped (`sweepAfter`: the account id it goes on after). */
const SWEEP_ID = 'watch-sweep';

/** Whether this function has the watch items' table (the payments function has it only beside a dashboard). */
export function watchTableConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env[DASHBOARD_TABLE_ENV]) || !env.AWS_LAMBDA_FUNCTION_NAME;
}

export class WatchItems extends WatchOutbox implements WatchStore {
  /** An update of the watch item; false when its condition failed. */
  private update(
    accountId: string,
    update: string,
    values: Item,
    condition?: string,
    names: Record<string, string> = {},
  ): Promise<boolean> {
    return this.updateItem(watchId(accountId), update, values, condition, names);
  }

  /** The watch item's conditional update and, when there is one, the outbox item's put, in one transaction. */
  private async transition(
    accountId: string,
    update: { expression: string; values: Item; condition?: string },
    outbox: { id: string; message: NewMessage | undefined; now: string },
  ): Promise<boolean> {
    if (!outbox.message) return this.update(accountId, update.expression, update.values, update.condition);
    try {
      await this.wire.call('TransactWriteItems', {
        TransactItems: [
          {
            Update: {
              TableName: this.name(),
              Key: { id: S(watchId(accountId)) },
              UpdateExpression: update.expression,
              ...(update.condition ? { ConditionExpression: update.condition } : {}),
              ExpressionAttributeValues: update.values,
            },
          },
          {
            Put: {
              TableName: this.name(),
              Item: outboxItem(outbox.id, accountId, outbox.message, outbox.now),
              ConditionExpression: 'attribute_not_exists(id)',
            },
          },
        ],
      });
      return true;
    } catch (error) {
      if (failedCondition(error)) return false;
      throw error;
    }
  }

  async watchPage(after: string | undefined, limit: number): Promise<{ watches: Watch[]; next?: string }> {
    const out = await this.wire.call<QueryCommandOutput>('Query', {
      TableName: this.name(),
      IndexName: INDEX.watchList,
      KeyConditionExpression: 'watchList = :list',
      ExpressionAttributeValues: { ':list': S('watch') },
      Limit: limit,
      ...(after ? { ExclusiveStartKey: { watchList: S('watch'), id: S(watchId(after)) } } : {}),
    });
    const watches = (out.Items ?? []).map((item) => toWatch(item as Item));
    const last = watches.at(-1);
    return out.LastEvaluatedKey && last ? { watches, next: last.accountId } : { watches };
  }

  async sweepCursor(): Promise<string | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.name(),
      Key: { id: S(SWEEP_ID) },
      ConsistentRead: true,
    });
    return out.Item?.sweepAfter?.S || undefined;
  }

  async saveSweepCursor(after: string | undefined, now: string): Promise<void> {
    await this.updateItem(
      SWEEP_ID,
      after ? 'SET updatedAt = :now, sweepAfter = :after' : 'SET updatedAt = :now REMOVE sweepAfter',
      { ':now': S(now), ...(after ? { ':after': S(after) } : {}) },
    );
  }

  async getWatch(accountId: string): Promise<Watch | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.name(),
      Key: { id: S(watchId(accountId)) },
      ConsistentRead: true,
    });
    return out.Item ? toWatch(out.Item as Item) : undefined;
  }

  async setAlert(
    accountId: string,
    thresholdCents: number | undefined,
    email: string | undefined,
    now: string,
    audit?: AuditEntry,
  ) {
    const { sets, values } = settingsUpdate(accountId, email, now);
    sets.push('alertState = :armed');
    values[':armed'] = S('armed');
    let expression: string;
    if (thresholdCents === undefined) expression = `SET ${sets.join(', ')} REMOVE thresholdCents`;
    else {
      sets.push('thresholdCents = :threshold');
      values[':threshold'] = N(thresholdCents);
      expression = `SET ${sets.join(', ')}`;
    }
    if (audit) await this.withEntry(accountId, { expression, values }, audit);
    else await this.update(accountId, expression, values);
    await this.copyLevels(accountId, now);
  }

  /**
   * The settings' levels onto the account's items, as the watch item has them now (watch-copy.ts),
   * then `levelsAt` on the watch item: copied once, the sweep need not copy them again.
   */
  async copyLevels(accountId: string, now: string): Promise<void> {
    const levels = watchLevels(await this.getWatch(accountId));
    await copyWatchLevels({ wire: this.wire, tables: this.tables }, accountId, levels, now);
    await this.update(accountId, 'SET levelsAt = :now', { ':now': S(now) });
  }

  /**
   * A settings change the customer made, with its audit entry: the watch item's update, the e-mail
   * saying so when there is one, and the entry, in one transaction.
   */
  private async withEntry(
    accountId: string,
    update: { expression: string; values: Item },
    audit: AuditEntry,
    outbox?: { id: string; message: NewMessage | undefined; now: string },
  ): Promise<void> {
    const table = this.name();
    await this.wire.call('TransactWriteItems', {
      TransactItems: withAudit<object>(
        [
          {
            Update: {
              TableName: table,
              Key: { id: S(watchId(accountId)) },
              UpdateExpression: update.expression,
              ExpressionAttributeValues: update.values,
            },
          },
          ...(outbox?.message
            ? [
                {
                  Put: {
                    TableName: table,
                    Item: outboxItem(outbox.id, accountId, outbox.message, outbox.now),
                    ConditionExpression: 'attribute_not_exists(id)',
                  },
                },
              ]
            : []),
        ],
        audit,
        this.tables,
      ),
    });
  }

  async setAutoTopUp(
    accountId: string,
    settings: { belowCents: number; buyCents: number; enabled: boolean },
    email: string | undefined,
    now: string,
    message?: NewMessage,
    audit?: AuditEntry,
  ) {
    const { sets, values } = settingsUpdate(accountId, email, now);
    sets.push('autoBelowCents = :below', 'autoBuyCents = :buy', 'autoEnabled = :enabled');
    Object.assign(values, {
      ':below': N(settings.belowCents),
      ':buy': N(settings.buyCents),
      ':enabled': { BOOL: settings.enabled },
    });
    // Switched on again: the reason it went off is the past.
    const remove = settings.enabled ? ' REMOVE autoOffReason, autoOffAt' : '';
    const update = { expression: `SET ${sets.join(', ')}${remove}`, values };
    const outbox = { id: changeMessageId(accountId, randomUUID()), message, now };
    if (audit) await this.withEntry(accountId, update, audit, outbox);
    else await this.transition(accountId, update, outbox);
    await this.copyLevels(accountId, now);
  }

  async queueMessage(accountId: string, message: NewMessage, now: string): Promise<void> {
    await this.wire.call('PutItem', {
      TableName: this.name(),
      Item: outboxItem(changeMessageId(accountId, randomUUID()), accountId, message, now),
      ConditionExpression: 'attribute_not_exists(id)',
    });
  }

  async recordCard(accountId: string, card: SavedCard, now: string) {
    const values: Item = {
      ':account': S(accountId),
      ':customer': S(card.customer),
      ':method': S(card.paymentMethod),
      ':from': N(card.from),
      ':now': S(now),
    };
    const sets = [
      'accountId = :account',
      'stripeCustomer = :customer',
      'paymentMethod = :method',
      'cardFrom = :from',
      'updatedAt = :now',
    ];
    for (const [attribute, value] of [
      ['cardBrand', card.brand],
      ['cardLast4', card.last4],
    ] as const)
      if (value) {
        sets.push(`${attribute} = :${attribute}`);
        values[`:${attribute}`] = S(value);
      }
    // An older session's event arriving late never replaces a card saved since.
    await this.update(
      accountId,
      `SET ${sets.join(', ')}`,
      values,
      'attribute_not_exists(cardFrom) OR cardFrom <= :from',
    );
  }

  alertSent(accountId: string, seq: number, message: NewMessage | undefined, now: string): Promise<boolean> {
    return this.transition(
      accountId,
      {
        expression: 'SET alertState = :sent, alertSeq = :next, alertAt = :now',
        values: {
          ':sent': S('sent'),
          ':armed': S('armed'),
          ':seq': N(seq),
          ':next': N(seq + 1),
          ':now': S(now),
        },
        condition:
          seq === 0
            ? 'alertState = :armed AND (attribute_not_exists(alertSeq) OR alertSeq = :seq)'
            : 'alertState = :armed AND alertSeq = :seq',
      },
      { id: alertMessageId(accountId, seq + 1), message, now },
    );
  }

  rearm(accountId: string, seq: number): Promise<boolean> {
    return this.update(
      accountId,
      'SET alertState = :armed',
      { ':armed': S('armed'), ':sent': S('sent'), ':seq': N(seq) },
      'alertState = :sent AND alertSeq = :seq',
    );
  }

  beginTopUp(accountId: string, seq: number, now: string): Promise<boolean> {
    const previous = seq - 1;
    return this.update(
      accountId,
      'SET topUpSeq = :seq, inFlightSeq = :seq, inFlightAt = :now',
      {
        ':seq': N(seq),
        ':on': { BOOL: true },
        ':now': S(now),
        ...(previous > 0 ? { ':previous': N(previous) } : {}),
      },
      `autoEnabled = :on AND attribute_not_exists(inFlightSeq) AND ${
        previous > 0 ? 'topUpSeq = :previous' : 'attribute_not_exists(topUpSeq)'
      }`,
    );
  }

  recordIntent(accountId: string, seq: number, paymentIntent: string): Promise<boolean> {
    return this.update(
      accountId,
      'SET inFlightIntent = :intent',
      { ':intent': S(paymentIntent), ':seq': N(seq) },
      'inFlightSeq = :seq',
    );
  }

  finishTopUp(accountId: string, seq: number): Promise<boolean> {
    return this.update(
      accountId,
      'REMOVE inFlightSeq, inFlightAt, inFlightIntent',
      { ':seq': N(seq) },
      'inFlightSeq = :seq',
    );
  }

  switchOff(
    accountId: string,
    seq: number,
    reason: string,
    message: NewMessage | undefined,
    now: string,
  ): Promise<boolean> {
    return this.transition(
      accountId,
      {
        expression:
          'SET autoEnabled = :off, autoOffReason = :reason, autoOffAt = :now REMOVE inFlightSeq, inFlightAt, inFlightIntent',
        values: {
          ':off': { BOOL: false },
          ':reason': S(reason.slice(0, 500)),
          ':now': S(now),
          ':seq': N(seq),
        },
        condition: 'inFlightSeq = :seq',
      },
      { id: topUpMessageId(accountId, seq), message, now },
    );
  }

  async rememberEmail(subject: string, email: string, now: string): Promise<void> {
    await this.wire.call('PutItem', {
      TableName: this.name(),
      Item: { id: S(profileId(subject)), email: S(email), updatedAt: S(now) },
    });
  }

  async emailOf(subject: string): Promise<string | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.name(),
      Key: { id: S(profileId(subject)) },
      ConsistentRead: true,
    });
    return out.Item?.email?.S || undefined;
  }
}
