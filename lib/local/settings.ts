import { join, resolve } from 'node:path';
import { dynamoAnswers, findEngine } from './dynamodb-local.js';

/**
 * The local stack's settings from the environment (README "Configuration"): PORT, SVC_DATA_DIR,
 * DYNAMODB_LOCAL_PORT. Shared by `npm start` and the operator CLI so both find the same data.
 */
export function localDynamoSettings(env: NodeJS.ProcessEnv = process.env) {
  const dataDir = resolve(env.SVC_DATA_DIR || '.data');
  const port = Number(env.DYNAMODB_LOCAL_PORT || 8000);
  if (!Number.isInteger(port) || port <= 0 || port > 65535)
    throw new Error(`DYNAMODB_LOCAL_PORT must be a port number, got ${env.DYNAMODB_LOCAL_PORT}`);
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    dataDir,
    dynamoDataDir: join(dataDir, 'dynamodb'),
    port,
    endpoint,
    /**
     * The DynamoDB Local already serving the data directory (`npm start` running, on whatever port),
     * or one answering on this port; else start one on the data directory. Never a second engine on
     * the same files: a live one that does not answer is a one-line error.
     */
    async connectOptions(): Promise<{ endpoint?: string; dataDir?: string; port?: number }> {
      const serving = await findEngine(join(dataDir, 'dynamodb'));
      if (serving) return { endpoint: serving };
      if (await dynamoAnswers(endpoint, 1_000)) return { endpoint };
      return { dataDir: join(dataDir, 'dynamodb'), port };
    },
  };
}

export function emulatorPort(env: NodeJS.ProcessEnv = process.env): number {
  const port = Number(env.PORT || 8787);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`PORT must be a port number, got ${env.PORT}`);
  return port;
}

/**
 * DYNAMODB_LIMITS: unset (or empty) runs DynamoDB Local as it is; a scale factor k >= 1 puts DynamoDB's
 * per-partition limits in front of it (lib/local/dynamodb-limits.ts), rates divided by k.
 */
export function dynamoLimitsScale(env: NodeJS.ProcessEnv = process.env): number | undefined {
  if (!env.DYNAMODB_LIMITS) return undefined;
  const scale = Number(env.DYNAMODB_LIMITS);
  if (!Number.isFinite(scale) || scale < 1)
    throw new Error(`DYNAMODB_LIMITS must be a scale factor of 1 or more, got ${env.DYNAMODB_LIMITS}`);
  return scale;
}
