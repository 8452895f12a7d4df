import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import { AttributeType, Billing, TableEncryptionV2, TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { AUDIT_TABLE, TABLES, type TableDefinition, TEAM_TABLE } from '../tables.js';

/**
 * A table's name when the stack names its tables (the sandbox): the stack's name and the table's id,
 * e.g. `HostedModelApi-sandbox-keys`, so that the CI role (ci-bootstrap-stack.ts) can name exactly
 * the tables it may use. Elsewhere CloudFormation names them (a replacement never collides).
 */
export function fixedTableName(stackName: string, def: TableDefinition): string {
  return `${stackName}-${def.id}`;
}

/** How the service's tables are made: named after the stack or not, retained or not, the throughput guardrail. */
export interface TableSettings {
  retain: boolean;
  /** Name the tables after the stack (fixedTableName). */
  fixedNames?: boolean;
  maxReadRequestUnits?: number;
  maxWriteRequestUnits?: number;
}

/**
 * One table of the schema in `scope` as `id`: on-demand (with the optional maximum throughput, a cost
 * guardrail set from context), point-in-time recovery, encrypted, its indexes and its TTL attribute,
 * and (outside the sandbox) deletion-protected and retained. Every table of the stack is made here.
 */
export function serviceTable(
  scope: Construct,
  id: string,
  def: TableDefinition,
  props: TableSettings,
): TableV2 {
  const key = (name: string) => ({ name, type: AttributeType.STRING });
  return new TableV2(scope, id, {
    ...(props.fixedNames ? { tableName: fixedTableName(Stack.of(scope).stackName, def) } : {}),
    partitionKey: key(def.partitionKey),
    ...(def.sortKey ? { sortKey: key(def.sortKey) } : {}),
    ...(def.timeToLiveAttribute ? { timeToLiveAttribute: def.timeToLiveAttribute } : {}),
    billing: Billing.onDemand({
      ...(props.maxReadRequestUnits !== undefined ? { maxReadRequestUnits: props.maxReadRequestUnits } : {}),
      ...(props.maxWriteRequestUnits !== undefined
        ? { maxWriteRequestUnits: props.maxWriteRequestUnits }
        : {}),
    }),
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    encryption: TableEncryptionV2.awsManagedKey(),
    deletionProtection: props.retain,
    removalPolicy: props.retain ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    globalSecondaryIndexes: def.indexes.map((index) => ({
      indexName: index.name,
      partitionKey: key(index.partitionKey),
      ...(index.sortKey ? { sortKey: key(index.sortKey) } : {}),
    })),
  });
}

/**
 * The tables from the one schema in lib/tables.ts: on-demand, point-in-time recovery,
 * encrypted, and (outside the sandbox) deletion-protected and retained. The team table (members,
 * invitations) and the audit log are made with the others, whether or not the dashboard is deployed:
 * the payments webhook, the reconciler and the operator write the log too.
 */
export class ServiceTables extends Construct {
  readonly keys: TableV2;
  readonly accounts: TableV2;
  readonly ledger: TableV2;
  readonly holds: TableV2;
  readonly team: TableV2;
  readonly audit: TableV2;

  constructor(scope: Construct, id: string, props: TableSettings) {
    super(scope, id);
    const make = (def: TableDefinition) => serviceTable(this, def.id, def, props);
    this.keys = make(TABLES.keys);
    this.accounts = make(TABLES.accounts);
    this.ledger = make(TABLES.ledger);
    this.holds = make(TABLES.holds);
    this.team = make(TEAM_TABLE);
    this.audit = make(AUDIT_TABLE);
  }
}
