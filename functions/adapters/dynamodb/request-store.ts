/**
 * The request path's store (core/store-request.ts RequestPathStore): the parts of the DynamoDB store
 * the completions function uses, composed alone: accounts (the key's read, a refusal's balance,
 * accounts-keys.ts), holds (holds.ts) and the ledger's settlement (ledger.ts, built with the transfers
 * a top-up spreads by, transfers.ts). The completions bundle carries these and no other part (keys,
 * corrections, activity, the dashboard's items, the team, invitations, the audit log: DynamoStore,
 * store.ts, adds them by extending this class). The request path costs one strongly consistent read
 * before the upstream call and one transactional write after the reply; an account that could
 * overdraw adds one conditional hold write before it.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Principal } from '../../core/access.js';
import type { ChargeEntry, Contention, Hold, HoldOutcome, SettleOutcome } from '../../core/store.js';
import type { RequestPathStore } from '../../core/store-request.js';
import { AccountsAndKeys } from './accounts-keys.js';
import type { WireConnection } from './connection.js';
import { Holds } from './holds.js';
import { slicesOf, type TableNames } from './items.js';
import { Ledger } from './ledger.js';
import type { Db } from './store-db.js';
import { type DynamoTimeouts, dynamoTimeouts } from './timeouts.js';
import { Transfers } from './transfers.js';
import { DynamoWire } from './wire.js';

export class DynamoRequestStore implements RequestPathStore {
  /** The request path's read and settlement, without the SDK client's middleware stack (wire.ts). */
  readonly wire: DynamoWire;
  /** What every part of the store is built on (store-db.ts): the parts DynamoStore adds too. */
  protected readonly db: Db;
  protected readonly accounts: AccountsAndKeys;
  protected readonly transfers: Transfers;
  protected readonly ledger: Ledger;
  protected readonly holds: Holds;

  constructor(
    readonly client: DynamoDBClient,
    readonly tables: TableNames,
    timeouts: DynamoTimeouts = dynamoTimeouts(),
    connection: WireConnection | DynamoDBClient = client,
  ) {
    this.wire = new DynamoWire(connection, timeouts);
    this.db = { client, tables, wire: this.wire };
    this.accounts = new AccountsAndKeys(this.db);
    this.transfers = new Transfers(this.db, this.accounts.slices);
    this.ledger = new Ledger(this.db, this.transfers);
    this.holds = new Holds(this.db);
  }

  loadPrincipal(keyHash: string): Promise<Principal | undefined> {
    return this.accounts.loadPrincipal(keyHash);
  }
  placeHold(hold: Hold, options: { deadline?: number; capShareNano?: bigint } = {}): Promise<HoldOutcome> {
    return this.holds.placeHold(hold, options);
  }
  releaseHold(hold: Hold, options: { onlyIfExpiredAt?: number; deadline?: number } = {}): Promise<boolean> {
    return this.holds.releaseHold(hold, options);
  }
  recordUsageOnHold(hold: Hold, usageRecord: string): Promise<boolean> {
    return this.holds.recordUsageOnHold(hold, usageRecord);
  }
  settleCharge(
    entry: ChargeEntry,
    options: { hold?: Hold; deadline?: number; contention?: Contention } = {},
  ): Promise<SettleOutcome> {
    return this.ledger.settleCharge(entry, options);
  }
  deferSettlement(
    entry: ChargeEntry,
    usageRecord: string,
    options: { hold?: Hold; deadline?: number } = {},
  ): Promise<'deferred' | 'already-settled'> {
    return this.holds.deferSettlement(entry, usageRecord, options);
  }
  async accountBalance(accountId: string): Promise<bigint | undefined> {
    const head = await this.accounts.slices.head(accountId);
    if (!head) return undefined;
    return this.accounts.slices.balance(accountId, slicesOf(head));
  }
}
