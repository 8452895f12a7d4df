/**
 * Who is calling: the Bearer key, parsed without I/O, then one strongly consistent read of the key and
 * its account. Before anything is spent, a database that fails or does not answer within its bounded
 * wait (adapters/dynamodb) is a 503 with Retry-After, never a hang or a bare 500.
 */
import type { Principal } from '../core/access.js';
import { hashKey, parseBearerKey } from '../core/auth.js';
import { HttpError, ServiceUnavailableError } from '../core/errors.js';
import type { Store } from '../core/store.js';
import { logger } from './observability.js';

export async function loadCaller(
  store: Pick<Store, 'loadPrincipal'>,
  authorization: string | undefined,
): Promise<Principal | undefined> {
  const keyHash = hashKey(parseBearerKey(authorization));
  try {
    return await store.loadPrincipal(keyHash);
  } catch (error) {
    if (error instanceof HttpError) throw error;
    logger.error('principal read failed', { error: error instanceof Error ? error : String(error) });
    throw new ServiceUnavailableError({ cause: error });
  }
}
