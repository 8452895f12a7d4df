/**
 * The e-mail addresses of the accounts the dashboard made, for the operator: a customer knows their
 * address, never their account id (`acct-<hex>`, derived from their sign-in subject). Read from the
 * dashboard table (functions/adapters/dynamodb/dashboard.ts and watch.ts): `user#<subject>` links a
 * subject to its account, `profile#<subject>` has the address it signed in with last, and
 * `watch#<accountId>` the one its low-balance e-mails go to. One Scan of that table (sessions too,
 * left out by the filter): an operator's command, not a request's path.
 */
import { type DynamoDBClient, ResourceNotFoundException } from '@aws-sdk/client-dynamodb';
import { scanAll } from '../../functions/adapters/dynamodb/store-db.js';

/** Each account's addresses, sorted, without repeats (an account no address is known for is absent). */
export type AccountEmails = Map<string, string[]>;

export interface EmailDirectory {
  /** Every known address of every account the dashboard table links. */
  accountEmails(): Promise<AccountEmails>;
}

/** The addresses in the dashboard table `table`. */
export function dashboardEmails(client: DynamoDBClient, table: string): EmailDirectory {
  return {
    async accountEmails() {
      let items: Awaited<ReturnType<typeof scanAll>>;
      try {
        items = await scanAll(client, {
          TableName: table,
          FilterExpression: 'begins_with(id, :user) OR begins_with(id, :profile) OR begins_with(id, :watch)',
          ExpressionAttributeValues: {
            ':user': { S: 'user#' },
            ':profile': { S: 'profile#' },
            ':watch': { S: 'watch#' },
          },
          ProjectionExpression: 'id, accountId, email',
        });
      } catch (error) {
        if (
          error instanceof ResourceNotFoundException ||
          (error as Error).name === 'ResourceNotFoundException'
        )
          throw new Error(
            `the dashboard table ${table} does not exist: set DASHBOARD_TABLE to the stack output DashboardTableName`,
          );
        throw error;
      }
      const accountOfSubject = new Map<string, string>();
      const emailOfSubject = new Map<string, string>();
      const emails: AccountEmails = new Map();
      const add = (accountId: string, email: string) => {
        const known = emails.get(accountId) ?? [];
        if (!known.includes(email)) emails.set(accountId, [...known, email].sort());
      };
      for (const item of items) {
        const id = item.id?.S ?? '';
        const accountId = item.accountId?.S;
        const email = item.email?.S;
        if (id.startsWith('user#') && accountId) accountOfSubject.set(id.slice('user#'.length), accountId);
        else if (id.startsWith('profile#') && email) emailOfSubject.set(id.slice('profile#'.length), email);
        else if (id.startsWith('watch#') && accountId && email) add(accountId, email);
      }
      for (const [subject, email] of emailOfSubject) {
        const accountId = accountOfSubject.get(subject);
        if (accountId) add(accountId, email);
      }
      return emails;
    },
  };
}

/** Whether `email` is one of `known`, as addresses compare (case aside, surrounding spaces aside). */
export const sameAddress = (email: string, known: string): boolean =>
  email.trim().toLowerCase() === known.trim().toLowerCase();
