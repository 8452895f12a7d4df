/**
 * Keys in DynamoDB: the operator's and the dashboard's key writes (created with the account's count of
 * active keys, revoked, capped) and their reads by hash, id and account.
 */
import type {
  GetItemCommandOutput,
  QueryCommandOutput,
  UpdateItemCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { keyNameProblem } from '../../core/keys.js';
import {
  AccountNotFoundError,
  KeyNotFoundError,
  type KeyRecord,
  TooManyKeysError,
} from '../../core/store.js';
import type { Audited } from '../../core/store-team.js';
import type { AuditEntry } from '../../core/team.js';
import { withAudit } from './audit.js';
import { type Item, keyItem, N, S, toKey } from './items.js';
import { INDEX } from './schema.js';
import {
  cancellationReasons,
  isRetryableSettlementError,
  queryAll,
  requestToken,
  retried,
  StorePart,
} from './store-db.js';

export class Keys extends StorePart {
  /**
   * The key item and its account's count of active keys (`activeKeys` on the account item) in one
   * transaction: the Put of the key and an ADD of 1 to the count, conditioned on the count being there
   * and, with `maxActive`, below it. So keys created at once are held to the bound, whatever their
   * number: each increment sees every earlier one. An account with no count yet (one made before it
   * was kept) has its count made first, from its active keys (startKeyCount), then the transaction is
   * sent again. Sent again too while DynamoDB cancels it for contention (a busy account's item is in
   * other transactions most of the time) or its answer is lost.
   */
  async createKey(key: KeyRecord, options: { maxActive?: number } & Audited = {}): Promise<void> {
    const { maxActive } = options;
    for (let attempt = 1; ; attempt++) {
      try {
        await retried(
          () =>
            this.wire.call('TransactWriteItems', {
              TransactItems: withAudit<object>(
                [
                  {
                    Update: {
                      TableName: this.tables.accounts,
                      Key: { accountId: S(key.accountId) },
                      UpdateExpression: 'ADD activeKeys :one',
                      ConditionExpression:
                        maxActive === undefined
                          ? 'attribute_exists(activeKeys)'
                          : 'attribute_exists(activeKeys) AND activeKeys < :max',
                      ExpressionAttributeValues: {
                        ':one': N(1),
                        ...(maxActive === undefined ? {} : { ':max': N(maxActive) }),
                      },
                      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
                    },
                  },
                  {
                    Put: {
                      TableName: this.tables.keys,
                      Item: keyItem(key),
                      ConditionExpression: 'attribute_not_exists(keyHash)',
                    },
                  },
                  // The entry, written with the key or not at all.
                ],
                options.audit,
                this.tables,
              ),
            }),
          // Contention, throttling, an answer lost (sent again, a commit is seen on the key's Put).
          isRetryableSettlementError,
        );
        return;
      } catch (error) {
        const [account, keyPut] = cancellationReasons(error) ?? [];
        // The key is there: an earlier send of this transaction committed though its answer was lost.
        if (keyPut?.Code === 'ConditionalCheckFailed') return;
        if (account?.Code !== 'ConditionalCheckFailed') throw error;
        if (!account.Item) throw new AccountNotFoundError(key.accountId);
        if (account.Item.activeKeys?.N === undefined && attempt === 1) {
          await this.startKeyCount(key.accountId);
          continue;
        }
        throw new TooManyKeysError(key.accountId, maxActive ?? 0);
      }
    }
  }

  /**
   * Makes the account's count of active keys, if it has none, from its keys (the keys-by-account
   * index): only while it has none, so that two first keys at once make it once. Every key created
   * since counts were kept is counted by its own transaction, which needs the count to exist: what the
   * index may not show yet is at most a key made just before counts were kept. A key revoked while the
   * count is being made may be counted: the count is then one too many (keys refused one early, never
   * one too many allowed) until a revocation of a counted key.
   */
  private async startKeyCount(accountId: string): Promise<void> {
    const active = (await this.listKeys(accountId)).filter((k) => k.status === 'active').length;
    try {
      await retried(() =>
        this.wire.call('UpdateItem', {
          TableName: this.tables.accounts,
          Key: { accountId: S(accountId) },
          UpdateExpression: 'SET activeKeys = :active',
          ConditionExpression: 'attribute_exists(accountId) AND attribute_not_exists(activeKeys)',
          ExpressionAttributeValues: { ':active': N(active) },
        }),
      );
    } catch (error) {
      // Counted by another key's creation meanwhile, or no such account (the next attempt says so).
      if ((error as { name?: string }).name !== 'ConditionalCheckFailedException') throw error;
    }
  }

  /** The key item by its hash, strongly consistent (GET /api/v1/key: the caller's own key). */
  async getKey(keyHash: string): Promise<KeyRecord | undefined> {
    const out = await this.wire.call<GetItemCommandOutput>('GetItem', {
      TableName: this.tables.keys,
      Key: { keyHash: S(keyHash) },
      ConsistentRead: true,
    });
    return out.Item ? toKey(out.Item) : undefined;
  }

  async findKeyById(keyId: string): Promise<KeyRecord | undefined> {
    const found = await this.wire.call<QueryCommandOutput>('Query', {
      TableName: this.tables.keys,
      IndexName: INDEX.keysByKeyId,
      KeyConditionExpression: 'keyId = :keyId',
      ExpressionAttributeValues: { ':keyId': S(keyId) },
    });
    const item = found.Items?.[0];
    return item ? toKey(item) : undefined;
  }

  /**
   * The key marked revoked; an active one leaves its account's count of active keys in the same
   * transaction (when the account has a count: one that has none counts its keys when it needs to).
   * Revoked already, or revoked meanwhile: only its status is written again (the first time kept).
   * The audit entry goes with the write that revokes it (none when it was revoked already): in the
   * transaction (its ClientRequestToken the entry's, so that a resend after a lost answer is that same
   * commit), or, for an account without a count, with the key's own write, conditioned on it active.
   */
  async revokeKey(keyHash: string, now: string, options: Audited = {}): Promise<KeyRecord> {
    const read = await this.getKey(keyHash);
    let entryLeft = read?.status === 'active' ? options.audit : undefined;
    if (read?.status === 'active') {
      const revoke = this.revokeUpdate(keyHash, now, '#status = :active AND accountId = :accountId', {
        ':active': S('active'),
        ':accountId': S(read.accountId),
      });
      const leaveCount = {
        TableName: this.tables.accounts,
        Key: { accountId: S(read.accountId) },
        UpdateExpression: 'ADD activeKeys :minusOne',
        ConditionExpression: 'attribute_exists(activeKeys)',
        ExpressionAttributeValues: { ':minusOne': N(-1) },
      };
      try {
        await retried(
          () =>
            this.wire.call('TransactWriteItems', {
              TransactItems: withAudit<object>(
                [{ Update: revoke }, { Update: leaveCount }],
                options.audit,
                this.tables,
              ),
              ...(options.audit ? { ClientRequestToken: requestToken('revoke', options.audit.entryId) } : {}),
            }),
          // Sent again after a lost answer, a commit fails on the key's status: counted once.
          isRetryableSettlementError,
        );
        entryLeft = undefined;
      } catch (error) {
        // Revoked meanwhile, or an account without a count: the key's own write below.
        const reasons = cancellationReasons(error);
        if (!reasons?.some((reason) => reason.Code === 'ConditionalCheckFailed')) throw error;
        if (reasons[0]?.Code === 'ConditionalCheckFailed') entryLeft = undefined;
      }
    }
    if (entryLeft) await this.revokeWithEntry(keyHash, now, entryLeft);
    const out = await this.wire.call<UpdateItemCommandOutput>('UpdateItem', {
      ...this.revokeUpdate(keyHash, now, 'attribute_exists(keyHash)'),
      ReturnValues: 'ALL_NEW',
    });
    return toKey(out.Attributes ?? {});
  }

  /** The one update that revokes a key (keeping its first revocation time), under `condition`. */
  private revokeUpdate(keyHash: string, now: string, condition: string, values: Item = {}) {
    return {
      TableName: this.tables.keys,
      Key: { keyHash: S(keyHash) },
      UpdateExpression: 'SET #status = :revoked, revokedAt = if_not_exists(revokedAt, :now)',
      ConditionExpression: condition,
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':revoked': S('revoked'), ':now': S(now), ...values },
    };
  }

  /** The key revoked with its entry, only while it is active (else nothing: revoked meanwhile). */
  private async revokeWithEntry(keyHash: string, now: string, entry: AuditEntry): Promise<void> {
    try {
      await retried(
        () =>
          this.wire.call('TransactWriteItems', {
            ClientRequestToken: requestToken('revoke-alone', entry.entryId),
            TransactItems: withAudit<object>(
              [{ Update: this.revokeUpdate(keyHash, now, '#status = :active', { ':active': S('active') }) }],
              entry,
              this.tables,
            ),
          }),
        isRetryableSettlementError,
      );
    } catch (error) {
      if (cancellationReasons(error)?.[0]?.Code !== 'ConditionalCheckFailed') throw error;
    }
  }

  /** Renames a key of the account, with its entry, in one transaction. */
  async renameKey(accountId: string, keyId: string, name: string, audit: AuditEntry): Promise<void> {
    const problem = keyNameProblem(name);
    if (problem) throw new RangeError(problem);
    const found = await this.findKeyById(keyId);
    if (!found || found.accountId !== accountId) throw new KeyNotFoundError(keyId);
    await this.keyWrite(
      keyId,
      {
        TableName: this.tables.keys,
        Key: { keyHash: S(found.keyHash) },
        UpdateExpression: 'SET #name = :name',
        ConditionExpression: 'accountId = :accountId',
        ExpressionAttributeNames: { '#name': 'name' },
        ExpressionAttributeValues: { ':accountId': S(accountId), ':name': S(name) },
      },
      audit,
    );
  }

  /**
   * One update of a key item with its entry in one transaction (a failed condition, the key not of
   * the account: KeyNotFoundError).
   */
  private async keyWrite(keyId: string, update: object, entry: AuditEntry): Promise<void> {
    try {
      await retried(
        () =>
          this.wire.call('TransactWriteItems', {
            ClientRequestToken: requestToken('key-write', entry.entryId),
            TransactItems: withAudit<object>([{ Update: update }], entry, this.tables),
          }),
        isRetryableSettlementError,
      );
    } catch (error) {
      if (cancellationReasons(error)?.[0]?.Code === 'ConditionalCheckFailed')
        throw new KeyNotFoundError(keyId);
      throw error;
    }
  }

  /**
   * The key's daily spend cap set (or removed): found by its id (the keys-by-id index), then one
   * UpdateItem of its item conditioned on its account, so that a caller can change only its own
   * account's keys (a key of another account is KeyNotFoundError, as one that does not exist). The
   * only write a cap puts on the key item: requests read it, never write it.
   */
  async setKeyDailyCap(
    accountId: string,
    keyId: string,
    capNano: bigint | undefined,
    options: Audited = {},
  ): Promise<KeyRecord> {
    if (capNano !== undefined && capNano <= 0n) throw new RangeError('a daily cap must be above zero');
    const found = await this.findKeyById(keyId);
    if (!found || found.accountId !== accountId) throw new KeyNotFoundError(keyId);
    if (options.audit) {
      const { dailyCapNano: _was, ...rest } = found;
      await this.keyWrite(
        keyId,
        {
          TableName: this.tables.keys,
          Key: { keyHash: S(found.keyHash) },
          UpdateExpression: capNano === undefined ? 'REMOVE dailyCapNano' : 'SET dailyCapNano = :cap',
          ConditionExpression: 'accountId = :accountId',
          ExpressionAttributeValues: {
            ':accountId': S(accountId),
            ...(capNano === undefined ? {} : { ':cap': N(capNano) }),
          },
        },
        options.audit,
      );
      return capNano === undefined ? rest : { ...rest, dailyCapNano: capNano };
    }
    try {
      const out = await this.wire.call<UpdateItemCommandOutput>('UpdateItem', {
        TableName: this.tables.keys,
        Key: { keyHash: S(found.keyHash) },
        UpdateExpression: capNano === undefined ? 'REMOVE dailyCapNano' : 'SET dailyCapNano = :cap',
        ConditionExpression: 'accountId = :accountId',
        ExpressionAttributeValues: {
          ':accountId': S(accountId),
          ...(capNano === undefined ? {} : { ':cap': N(capNano) }),
        },
        ReturnValues: 'ALL_NEW',
      });
      return toKey(out.Attributes ?? {});
    } catch (error) {
      if (error instanceof Error && error.name === 'ConditionalCheckFailedException')
        throw new KeyNotFoundError(keyId);
      throw error;
    }
  }

  async listKeys(accountId: string): Promise<KeyRecord[]> {
    const items = await queryAll(this.wire, {
      TableName: this.tables.keys,
      IndexName: INDEX.keysByAccount,
      KeyConditionExpression: 'accountId = :accountId',
      ExpressionAttributeValues: { ':accountId': S(accountId) },
    });
    return items.map(toKey);
  }
}
