import { type CfnElement, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { BackupPlan, BackupResource, BackupVault } from 'aws-cdk-lib/aws-backup';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

/**
 * Daily AWS Backup recovery points of the tables that hold money (accounts, ledger) and of the team
 * table and the audit log (who may act on an account, and what they did), kept 35 days in
 * a retained vault, beside the tables' own point-in-time recovery (35 days, to the second). The
 * restore runbook is in docs/deploy.md ("Restoring a table"). AWS Backup assumes a role of its own, not
 * AWS's managed service-role policy AWSBackupServiceRolePolicyForBackup (which reaches every table and
 * every service it backs up), with that policy's DynamoDB statements narrowed to these tables:
 * DescribeTable, CreateBackup, StartAwsBackupJob and ListTagsOfResource on each table (the last two for
 * DynamoDB's advanced backups, https://docs.aws.amazon.com/aws-backup/latest/devguide/advanced-ddb-backup.html),
 * DescribeBackup and DeleteBackup on the table's backups (`table/<name>/backup/*`, where a DynamoDB
 * backup lives), and its vault statement (DescribeBackupVault, CopyIntoBackupVault) on this vault. Not
 * its KMS statements: the tables are encrypted with the AWS managed key (service-tables.ts), whose key
 * policy lets the account's principals use it through DynamoDB.
 */
export class TableBackups extends Construct {
  readonly vault: BackupVault;
  readonly plan: BackupPlan;

  constructor(scope: Construct, id: string, props: { tables: TableV2[] }) {
    super(scope, id);
    this.vault = new BackupVault(this, 'Vault', { removalPolicy: RemovalPolicy.RETAIN });
    this.plan = BackupPlan.daily35DayRetention(this, 'Plan', this.vault);
    const role = new Role(this, 'Role', {
      assumedBy: new ServicePrincipal('backup.amazonaws.com'),
      description: 'AWS Backup: daily recovery points of the accounts, ledger, team and audit tables',
    });
    const tableArns = props.tables.map((table) => table.tableArn);
    role.addToPolicy(
      new PolicyStatement({
        actions: [
          'dynamodb:DescribeTable',
          'dynamodb:CreateBackup',
          'dynamodb:StartAwsBackupJob',
          'dynamodb:ListTagsOfResource',
        ],
        resources: tableArns,
      }),
    );
    // A backup's ARN is its table's followed by /backup/<id> (the managed policy's `table/*/backup/*`).
    role.addToPolicy(
      new PolicyStatement({
        actions: ['dynamodb:DescribeBackup', 'dynamodb:DeleteBackup'],
        resources: tableArns.map((arn) => `${arn}/backup/*`),
      }),
    );
    // The id at the end of a backup's ARN is DynamoDB's: `<table ARN>/backup/*` is the narrowest resource
    // that names one table's backups. Acknowledged for exactly those resources, or cdk-nag stops the deploy.
    const stack = Stack.of(this);
    Validations.of(this).acknowledge(
      ...props.tables.map((table) => ({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${stack.resolve(stack.getLogicalId(table.node.defaultChild as CfnElement))}.Arn>/backup/*]`,
        reason:
          "DescribeBackup and DeleteBackup on one table's backups: a backup's ARN ends in an id DynamoDB assigns, so the table's ARN followed by /backup/* is the narrowest resource that names them.",
      })),
    );
    role.addToPolicy(
      new PolicyStatement({
        actions: ['backup:DescribeBackupVault', 'backup:CopyIntoBackupVault'],
        resources: [this.vault.backupVaultArn],
      }),
    );
    this.plan.addSelection('Tables', {
      resources: props.tables.map((table) => BackupResource.fromArn(table.tableArn)),
      // Immutable: the selection would otherwise attach AWS's managed policy to it.
      role: role.withoutPolicyUpdates(),
      allowRestores: false,
    });
  }
}
