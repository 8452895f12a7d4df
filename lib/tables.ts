/**
 * The table schema for the CDK stack and the local stack. It is defined once, beside the adapter that
 * owns the tables (functions/adapters/dynamodb/schema.ts, pure data with no runtime dependency).
 */
export {
  AUDIT_TABLE,
  AUDIT_TABLE_ENV,
  DASHBOARD_TABLE,
  DASHBOARD_TABLE_ENV,
  INDEX,
  keyAttributes,
  LOCAL_AUDIT_TABLE_NAME,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TABLE_NAMES,
  LOCAL_TEAM_TABLE_NAME,
  TABLE_ENV,
  TABLES,
  type TableDefinition,
  TEAM_TABLE,
  TEAM_TABLE_ENV,
} from '../functions/adapters/dynamodb/schema.js';
