import { Logger } from '@aws-lambda-powertools/logger';

/**
 * Structured JSON logs. What may be logged: request id, account id, key id, generation id, tier,
 * tokens, cost, latency. What may never be: an API key, a prompt, a completion, a credential.
 */
export const logger = new Logger({
  serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'hosted-model-api',
  logLevel: (process.env.LOG_LEVEL as 'INFO' | 'DEBUG' | 'WARN' | 'ERROR' | 'SILENT' | undefined) ?? 'INFO',
});
