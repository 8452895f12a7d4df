/**
 * The tables a store finds apart from the four of TableNames' environment: the team's and the audit
 * log, named by TableNames (`team`, `audit`) when its maker knows them (the CLI, the local stack,
 * tests), else by their environment variable at first use, as the dashboard's table is (required in
 * Lambda, the local stack's name elsewhere): only the functions that use them are told of them.
 */
import type { TableNames } from './items.js';
import { AUDIT_TABLE_ENV, LOCAL_AUDIT_TABLE_NAME, LOCAL_TEAM_TABLE_NAME, TEAM_TABLE_ENV } from './schema.js';

function fromEnv(variable: string, local: string, env: NodeJS.ProcessEnv = process.env): string {
  const name = env[variable];
  if (name) return name;
  if (env.AWS_LAMBDA_FUNCTION_NAME)
    throw new Error(`${variable} is not set: the function cannot find its table`);
  return local;
}

export const auditTableOf = (tables: TableNames): string =>
  tables.audit ?? fromEnv(AUDIT_TABLE_ENV, LOCAL_AUDIT_TABLE_NAME);

export const teamTableOf = (tables: TableNames): string =>
  tables.team ?? fromEnv(TEAM_TABLE_ENV, LOCAL_TEAM_TABLE_NAME);
