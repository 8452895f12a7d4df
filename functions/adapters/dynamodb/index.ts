/**
 * The DynamoDB adapter: the store port's only implementation (and the request path's part of it,
 * request-store.ts), its client, its tables and item format.
 */
export { getRequestStore, getStore } from './client.js';
export { type TableNames, tableNamesFromEnv } from './items.js';
export { DynamoStore } from './store.js';
