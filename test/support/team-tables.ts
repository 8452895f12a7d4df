import {
  AUDIT_TABLE_ENV,
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_TEAM_TABLE_NAME,
  TEAM_TABLE_ENV,
} from '../../functions/adapters/dynamodb/schema.js';

/** The team and audit tables a test's DynamoDB store finds (by their environment, as a function does). */
export const localTeamTables = () => ({
  team: process.env[TEAM_TABLE_ENV] ?? LOCAL_TEAM_TABLE_NAME,
  audit: process.env[AUDIT_TABLE_ENV] ?? LOCAL_AUDIT_TABLE_NAME,
});
