import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { DynamoStore } from '../../functions/adapters/dynamodb/index.js';
import { DASHBOARD_TABLE_ENV, LOCAL_DASHBOARD_TABLE_NAME } from '../../functions/adapters/dynamodb/schema.js';
import { WatchItems } from '../../functions/adapters/dynamodb/watch.js';
import { auditEntry } from '../../functions/core/team.js';
import {
  ensureDashboardTable,
  ensureTables,
  ensureTeamTables,
  localClient,
} from '../../lib/local/dynamodb-local.js';
import { localTableNames } from '../../lib/local/stack.js';
import { localTeamTables } from '../support/team-tables.js';

/**
 * The alert's and the auto top-up's settings changed with their audit entry (WatchStore.setAlert,
 * setAutoTopUp with `audit`): the watch item's update, the e-mail saying so and the entry in one
 * transaction, on DynamoDB Local.
 */
const tables = localTableNames(`watchaudit${randomBytes(3).toString('hex')}-`);
const client = localClient(inject('dynamoEndpoint'));
const store = new DynamoStore(client, tables);
const watches = new WatchItems({ client: store.client, tables: store.tables, wire: store.wire });
beforeAll(async () => {
  await ensureTables(client, tables);
  await ensureDashboardTable(client, process.env[DASHBOARD_TABLE_ENV] ?? LOCAL_DASHBOARD_TABLE_NAME);
  await ensureTeamTables(client, localTeamTables());
});

describe('settings changed with their audit entry', () => {
  it('writes the alert and the auto top-up with their entries; without one, as before', async () => {
    const accountId = `watch-${randomBytes(5).toString('hex')}`;
    const actor = { kind: 'member' as const, subject: 'sub-ann' };
    const at = (ms: number) => new Date(Date.UTC(2026, 11, 7, 12, 0, 0, ms)).toISOString();
    await watches.setAlert(
      accountId,
      500,
      'ann@example.com',
      at(0),
      auditEntry(accountId, actor, 'alert.changed', at(0), { details: { threshold: '$5.00' } }),
    );
    await watches.setAutoTopUp(
      accountId,
      { belowCents: 1_000, buyCents: 2_500, enabled: true },
      'ann@example.com',
      at(1),
      { to: 'ann@example.com', subject: 'Auto top-up on', text: 'On.' },
      auditEntry(accountId, actor, 'auto_top_up.changed', at(1), { details: { enabled: 'true' } }),
    );
    await watches.setAlert(accountId, 700, undefined, at(2));
    expect(await watches.getWatch(accountId)).toMatchObject({
      thresholdCents: 700,
      autoTopUp: { belowCents: 1_000, buyCents: 2_500, enabled: true },
    });
    const { entries } = await store.listAudit(accountId, { limit: 10 });
    expect(entries.map((e) => [e.action, e.details])).toEqual([
      ['auto_top_up.changed', { enabled: 'true' }],
      ['alert.changed', { threshold: '$5.00' }],
    ]);
  });
});
