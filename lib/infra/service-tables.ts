import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import { AttributeType, Billing, TableEncryptionV2, TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { TABLES, type TableDefinition } from '../tables.js';

/**
 * A table's name when the stack names its tables (the sandbox): the stack's name and the table's id,
 * e.g. `HostedModelApi-sandbox-keys`, so that the CI role (ci-bootstrap-stack.ts) can name exactly
 * the tables it may use. Elsewhere CloudFormation names them (a replacement never collides).
 */
export function fixedTableName(stackName: string, def: TableDefinition): string {
  return `${stackName}-${def.id}`;
}

/**
 * The tables from the one schema in lib/tables.ts: on-demand, point-in-time recovery,
 * encrypted, and (outside the sandbox) deletion-protected and retained.
 */
export class ServiceTables extends Construct {
  readonly keys: TableV2;
  readonly accounts: TableV2;
  readonly ledger: TableV2;
  readonly holds: TableV2;

  constructor(
    scope: Construct,
    id: string,
    props: {
      retain: boolean;
      /** Name the tables after the stack (fixedTableName). */
      fixedNames?: boolean;
      maxReadRequestUnits?: number;
      maxWriteRequestUnits?: number;
    },
  ) {
    super(scope, id);
    const make = (def: TableDefinition) => {
      const key = (name: string) => ({ name, type: AttributeType.STRING });
      return new TableV2(this, def.id, {
        ...(props.fixedNames ? { tableName: fixedTableName(Stack.of(this).stackName, def) } : {}),
        partitionKey: key(def.partitionKey),
        ...(def.sortKey ? { sortKey: key(def.sortKey) } : {}),
        // On demand, with the optional maximum throughput (a cost guardrail, set from context).
        billing: Billing.onDemand({
          ...(props.maxReadRequestUnits !== undefined
            ? { maxReadRequestUnits: props.maxReadRequestUnits }
            : {}),
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
    };
    this.keys = make(TABLES.keys);
    this.accounts = make(TABLES.accounts);
    this.ledger = make(TABLES.ledger);
    this.holds = make(TABLES.holds);
  }
}
