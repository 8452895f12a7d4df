/** The DynamoDB adapter: the store port's only implementation, its client, its tables and item format. */
export { dynamoClientConfig, getStore } from './client.js';
export { type TableNames, tableNamesFromEnv } from './items.js';
export { DynamoStore, isRetryableSettlementError } from './store.js';
export { type DynamoTimeouts, dynamoTimeouts } from './timeouts.js';
