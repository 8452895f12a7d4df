/**
 * The dashboard's items in DynamoDB: sessions and OpenID subject links in the dashboard table
 * (schema.ts DASHBOARD_TABLE, named by DASHBOARD_TABLE and looked up at first use, so the functions
 * that never touch it need not be told its name), and the billing history read from the ledger by
 * entry id prefix (top-ups and corrections are entries of slice 0's partition: ledger.ts, corrections.ts).
 * Every call goes through the wire (wire.ts), as the rest of the store's: a function has no SDK client.
 *
 * Items of the dashboard table, keyed by `id`:
 * - `session#<SHA-256 hex of the session id>`: accountId, subject, createdAt, authTime (N, the ID
 *   token's `auth_time`), expiresAt (N, epoch seconds, the table's TTL attribute).
 *   An expired one is refused on read: TTL deletes within days.
 *   `notice`: what a POST left for the page after its redirect (JSON, core/session.ts), removed as read.
 * - `user#<OpenID subject>`: accountId, createdAt. Written once, conditionally.
 * - `billing-customer#<accountId>`: customer (the account's Stripe Customer id), accountId,
 *   rememberedAt, and `replaced` (the Customer it took the place of, found deleted in Stripe). Put
 *   with a condition: the first remembered wins (`attribute_not_exists(id)`); a replacement is written
 *   only while the item still names the Customer found gone (`customer = :gone`), so two pages that
 *   both found it gone write one replacement and the other reads it. No TTL: kept as long as the
 *   account (a Customer is never forgotten, only replaced once Stripe no longer has it).
 */
import type { GetItemCommandOutput, UpdateItemCommandOutput } from '@aws-sdk/client-dynamodb';
import type { DashboardSession, LedgerEntry, SessionNotice } from '../../core/store.js';
import { correctionEntryId, topUpEntryId } from '../../core/store.js';
import { byBytes } from '../../core/strings.js';
import { N, S, toLedgerEntry } from './items.js';
import { DASHBOARD_TABLE_ENV, LOCAL_DASHBOARD_TABLE_NAME } from './schema.js';
import { type Db, queryAll, StorePart, sortKeyPrefix } from './store-db.js';

/** The dashboard table's name: DASHBOARD_TABLE, required in Lambda; the local name elsewhere. */
function dashboardTableFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const name = env[DASHBOARD_TABLE_ENV];
  if (name) return name;
  if (env.AWS_LAMBDA_FUNCTION_NAME)
    throw new Error(`${DASHBOARD_TABLE_ENV} is not set: the function cannot find its dashboard table`);
  return LOCAL_DASHBOARD_TABLE_NAME;
}

const sessionId = (hash: string) => `session#${hash}`;
const userId = (subject: string) => `user#${subject}`;
const billingCustomerId = (accountId: string) => `billing-customer#${accountId}`;
const conditionFailed = (error: unknown) =>
  (error as { name?: string } | undefined)?.name === 'ConditionalCheckFailedException';

/** A part of the store whose items live in the dashboard table, named at first use. */
export class DashboardTablePart extends StorePart {
  private table: string | undefined;

  constructor(db: Db) {
    super(db);
  }

  protected name(): string {
    this.table ??= dashboardTableFromEnv();
    return this.table;
  }
}

export class DashboardItems extends DashboardTablePart {
  async putSession(session: DashboardSession): Promise<void> {
    await this.wire.call('PutItem', {
      TableName: this.name(),
      Item: {
        id: S(sessionId(session.sessionHash)),
        accountId: S(session.accountId),
        subject: S(session.subject),
        createdAt: S(session.createdAt),
        expiresAt: N(session.expiresAt),
        ...(session.authTime !== undefined ? { authTime: N(session.authTime) } : {}),
      },
      // A fresh random id never meets an item; should it, nothing is overwritten.
      ConditionExpression: 'attribute_not_exists(id)',
    });
  }

  async getSession(sessionHash: string, nowSeconds: number): Promise<DashboardSession | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.name(),
      Key: { id: S(sessionId(sessionHash)) },
      ConsistentRead: true,
    });
    const item = out.Item;
    const expiresAt = Number(item?.expiresAt?.N ?? '0');
    if (!item?.accountId?.S || !(expiresAt > nowSeconds)) return undefined;
    return {
      sessionHash,
      accountId: item.accountId.S,
      subject: item.subject?.S ?? '',
      createdAt: item.createdAt?.S ?? '',
      expiresAt,
      ...(item.authTime?.N !== undefined ? { authTime: Number(item.authTime.N) } : {}),
    };
  }

  async deleteSession(sessionHash: string): Promise<void> {
    await this.wire.call('DeleteItem', { TableName: this.name(), Key: { id: S(sessionId(sessionHash)) } });
  }

  /** The notice as JSON on the session item (`notice`), only while the item is there. */
  async setSessionNotice(sessionHash: string, notice: SessionNotice): Promise<void> {
    try {
      await this.wire.call('UpdateItem', {
        TableName: this.name(),
        Key: { id: S(sessionId(sessionHash)) },
        UpdateExpression: 'SET notice = :notice',
        ConditionExpression: 'attribute_exists(id)',
        ExpressionAttributeValues: { ':notice': S(JSON.stringify(notice)) },
      });
    } catch (error) {
      if ((error as { name?: string } | undefined)?.name !== 'ConditionalCheckFailedException') throw error;
    }
  }

  /** REMOVEs the notice, returning what it was: of two reads at once, one gets it. */
  async takeSessionNotice(sessionHash: string, nowSeconds: number): Promise<SessionNotice | undefined> {
    let out: UpdateItemCommandOutput;
    try {
      out = await this.wire.call<UpdateItemCommandOutput>('UpdateItem', {
        TableName: this.name(),
        Key: { id: S(sessionId(sessionHash)) },
        UpdateExpression: 'REMOVE notice',
        ConditionExpression: 'attribute_exists(notice)',
        ReturnValues: 'UPDATED_OLD',
      });
    } catch (error) {
      if ((error as { name?: string } | undefined)?.name === 'ConditionalCheckFailedException')
        return undefined;
      throw error;
    }
    const text = out.Attributes?.notice?.S;
    const notice = text ? (JSON.parse(text) as SessionNotice) : undefined;
    return notice && notice.until > nowSeconds ? notice : undefined;
  }

  async accountOfUser(subject: string): Promise<string | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.name(),
      Key: { id: S(userId(subject)) },
      ConsistentRead: true,
    });
    return out.Item?.accountId?.S;
  }

  async linkUser(subject: string, accountId: string, now: string): Promise<string> {
    try {
      await this.wire.call('PutItem', {
        TableName: this.name(),
        Item: { id: S(userId(subject)), accountId: S(accountId), createdAt: S(now) },
        ConditionExpression: 'attribute_not_exists(id)',
      });
      return accountId;
    } catch (error) {
      if ((error as { name?: string } | undefined)?.name !== 'ConditionalCheckFailedException') throw error;
      const linked = await this.accountOfUser(subject);
      if (!linked) throw error;
      return linked;
    }
  }

  async billingCustomerOf(accountId: string): Promise<string | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.name(),
      Key: { id: S(billingCustomerId(accountId)) },
      ConsistentRead: true,
    });
    return out.Item?.customer?.S;
  }

  /** One conditional Put (no UpdateItem: the dashboard's role puts and gets its items); on a refusal, the winner read. */
  async rememberBillingCustomer(
    accountId: string,
    customer: string,
    now: string,
    options: { replacing?: string } = {},
  ): Promise<string> {
    const gone =
      options.replacing !== undefined && options.replacing !== customer ? options.replacing : undefined;
    try {
      await this.wire.call('PutItem', {
        TableName: this.name(),
        Item: {
          id: S(billingCustomerId(accountId)),
          accountId: S(accountId),
          customer: S(customer),
          rememberedAt: S(now),
          ...(gone ? { replaced: S(gone) } : {}),
        },
        ...(gone
          ? {
              ConditionExpression: 'attribute_not_exists(id) OR #customer = :gone',
              ExpressionAttributeNames: { '#customer': 'customer' },
              ExpressionAttributeValues: { ':gone': S(gone) },
            }
          : { ConditionExpression: 'attribute_not_exists(id)' }),
      });
      return customer;
    } catch (error) {
      if (!conditionFailed(error)) throw error;
      const remembered = await this.billingCustomerOf(accountId);
      if (!remembered) throw error;
      return remembered;
    }
  }

  /** Top-ups and corrections: slice 0's partition, by prefix (charges are never read). */
  async listCreditHistory(accountId: string): Promise<LedgerEntry[]> {
    const byPrefix = (prefix: string) =>
      queryAll(this.wire, {
        TableName: this.tables.ledger,
        KeyConditionExpression: `accountId = :accountId AND ${sortKeyPrefix('entryId', prefix).condition}`,
        ExpressionAttributeValues: { ':accountId': S(accountId), ...sortKeyPrefix('entryId', prefix).values },
        ConsistentRead: true,
      });
    const [topUps, corrections] = await Promise.all([
      byPrefix(topUpEntryId('')),
      byPrefix(correctionEntryId('')),
    ]);
    return [...topUps, ...corrections]
      .map(toLedgerEntry)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || byBytes(b.entryId, a.entryId));
  }
}
