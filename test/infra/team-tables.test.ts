import { describe, expect, it } from 'vitest';
import { AUDIT_TABLE, TEAM_TABLE } from '../../lib/tables.js';
import { type Resource, resources, synthStages } from './synth-offline.js';

/**
 * The team table (members, invitations, the owners count) and the audit log as the stack makes them
 * (lib/infra/service-tables.ts): as the other tables are (on-demand, point-in-time recovery,
 * encrypted, retained and backed up in prod), with their TTL; and who may do what on them: the
 * dashboard reads and writes both, the payments webhook and the reconciler only Put audit entries,
 * no other function touches either, and a function is told a table's name only where it may use it.
 */
const stackOf = synthStages();

const tableId = (all: Record<string, Resource>, suffix: string): string => {
  const found = Object.entries(all).filter(
    ([id, r]) =>
      r.Type === 'AWS::DynamoDB::GlobalTable' && new RegExp(`^Tables${suffix}[0-9A-F]{8}$`).test(id),
  );
  expect(found, suffix).toHaveLength(1);
  return found[0]?.[0] ?? '';
};

type Statement = { Action: string | string[]; Resource: unknown };

/** Each action a role's policies allow on the team and audit tables: `<action> <team|audit>[ index]`. */
function grants(all: Record<string, Resource>, role: string, ids: { team: string; audit: string }): string[] {
  const found = new Set<string>();
  for (const r of Object.values(all)) {
    if (r.Type !== 'AWS::IAM::Policy') continue;
    if (!((r.Properties?.Roles as { Ref?: string }[] | undefined) ?? []).some((x) => x.Ref === role))
      continue;
    for (const s of (r.Properties as { PolicyDocument: { Statement: Statement[] } }).PolicyDocument.Statement)
      for (const resource of [s.Resource].flat()) {
        const text = JSON.stringify(resource);
        for (const [name, id] of Object.entries(ids)) {
          if (!text.includes(`"${id}"`)) continue;
          for (const action of [s.Action].flat())
            found.add(`${action} ${name}${text.includes('/index/') ? ' index' : ''}`);
        }
      }
  }
  return [...found].sort();
}

describe.each(['sandbox', 'prod'] as const)('the team and audit tables (%s)', (stage) => {
  const all = () => resources(stackOf(stage).template);

  it('are made as the others: keys, index, TTL, point-in-time recovery, encryption; retained and backed up in prod', () => {
    for (const [suffix, def] of [
      ['team', TEAM_TABLE],
      ['audit', AUDIT_TABLE],
    ] as const) {
      const id = tableId(all(), suffix);
      const table = all()[id] as Resource & { DeletionPolicy?: string };
      const p = table.Properties as Record<string, unknown>;
      expect(p.KeySchema).toEqual([
        { AttributeName: def.partitionKey, KeyType: 'HASH' },
        { AttributeName: def.sortKey, KeyType: 'RANGE' },
      ]);
      expect(p.TimeToLiveSpecification).toEqual({ AttributeName: 'expiresAt', Enabled: true });
      expect(p.SSESpecification).toMatchObject({ SSEEnabled: true });
      const replica = (p.Replicas as Record<string, unknown>[])[0];
      expect(replica?.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
      expect(
        ((p.GlobalSecondaryIndexes ?? []) as { IndexName: string; KeySchema: unknown }[]).map(
          (i) => i.IndexName,
        ),
      ).toEqual(def.indexes.map((i) => i.name));
      if (stage === 'prod') {
        expect(table.DeletionPolicy).toBe('Retain');
        expect(replica?.DeletionProtectionEnabled).toBe(true);
        const selection = Object.values(all()).find((r) => r.Type === 'AWS::Backup::BackupSelection');
        expect(JSON.stringify(selection?.Properties)).toContain(`"${id}"`);
      }
    }
  });

  it('are used by exactly the functions that need them, each told the names of the tables it may use', () => {
    const ids = { team: tableId(all(), 'team'), audit: tableId(all(), 'audit') };
    const byFunction: Record<string, string[]> = {};
    for (const [id, fn] of Object.entries(all())) {
      if (fn.Type !== 'AWS::Lambda::Function') continue;
      const role = (fn.Properties?.Role as { 'Fn::GetAtt'?: [string, string] } | undefined)?.[
        'Fn::GetAtt'
      ]?.[0];
      const allowed = role ? grants(all(), role, ids) : [];
      const env = ((fn.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables ?? {}) as Record<string, unknown>;
      expect(env.TEAM_TABLE !== undefined, `${id} TEAM_TABLE`).toBe(allowed.some((g) => g.includes(' team')));
      expect(env.AUDIT_TABLE !== undefined, `${id} AUDIT_TABLE`).toBe(
        allowed.some((g) => g.endsWith(' audit')),
      );
      if (allowed.length > 0) byFunction[id.replace(/[0-9A-F]{8}$/, '')] = allowed;
    }
    expect(byFunction).toEqual({
      ...(stage === 'prod'
        ? {
            DashboardFunction: [
              'dynamodb:DeleteItem team',
              'dynamodb:GetItem team',
              'dynamodb:PutItem audit',
              'dynamodb:PutItem team',
              'dynamodb:Query audit',
              'dynamodb:Query team',
              'dynamodb:Query team index',
              'dynamodb:UpdateItem team',
            ],
          }
        : {}),
      // The balance watch (with the dashboard): an auto top-up whose event was lost, credited with its entry.
      ...(stage === 'prod' ? { BalanceWatchFunction: ['dynamodb:PutItem audit'] } : {}),
      PaymentsFunction: ['dynamodb:PutItem audit'],
      PaymentsReconcilerFunction: ['dynamodb:PutItem audit'],
    });
  });

  it('pass cdk-nag', () => {
    expect(stackOf(stage).nag?.conclusion).toBe('success');
    expect(stackOf(stage).nag?.violations).toEqual([]);
  });
});
