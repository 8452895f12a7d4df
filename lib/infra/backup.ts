import { RemovalPolicy } from 'aws-cdk-lib';
import { BackupPlan, BackupResource, BackupVault } from 'aws-cdk-lib/aws-backup';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

/**
 * Daily AWS Backup recovery points of the tables that hold money (accounts, ledger), kept 35 days in
 * a retained vault, beside the tables' own point-in-time recovery (35 days, to the second). The
 * restore runbook is in docs/deploy.md ("Restoring a table"). AWS Backup assumes a role of its own with
 * only what a DynamoDB backup needs, not AWS's managed service-role policy (which reaches every table
 * and every service it backs up): DescribeTable and CreateBackup as that policy grants them, and
 * StartAwsBackupJob and ListTagsOfResource for DynamoDB's advanced backups
 * (https://docs.aws.amazon.com/aws-backup/latest/devguide/advanced-ddb-backup.html).
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
      description: 'AWS Backup: daily recovery points of the accounts and ledger tables',
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
