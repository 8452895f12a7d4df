/** The DynamoDB adapter: the store port's only implementation, its client, its tables and item format. */
export { getStore } from './client.js';
export { type TableNames, tableNamesFromEnv } from './items.js';
export { DynamoStore } from './store.js';
