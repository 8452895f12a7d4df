/**
 * The table schema for the CDK stack and the local stack. It is defined once, beside the adapter that
 * owns the tables (functions/adapters/dynamodb/schema.ts, pure data with no runtime dependency).
 */
export {
  DASHBOARD_TABLE,
  DASHBOARD_TABLE_ENV,
  INDEX,
  keyAttributes,
  LOCAL_DASHBOARD_TABLE_NAME,
  LOCAL_TABLE_NAMES,
  TABLE_ENV,
  TABLES,
  type TableDefinition,
} from '../functions/adapters/dynamodb/schema.js';
