/**
 * The dashboard user pool's pre-sign-up trigger (guard.ts): its counters in DASHBOARD_TABLE, its caps
 * from SIGN_UPS_PER_HOUR, SIGN_UPS_PER_DAY and SIGN_UPS_PER_DOMAIN_PER_DAY (lib/infra/dashboard.ts).
 * A refusal is logged with the limit reached, never the address.
 */
import middy from '@middy/core';
import { getStore } from '../adapters/dynamodb/index.js';
import { SignUpCounters } from '../adapters/dynamodb/sign-up.js';
import { logContext, logger } from '../shared/observability.js';
import { capsFromEnv, guardSignUp, type PreSignUpEvent } from './guard.js';

let counters: SignUpCounters | undefined;

export const handler = middy<PreSignUpEvent, PreSignUpEvent>()
  .use(logContext())
  .handler(async (event) => {
    const store = getStore();
    counters ??= new SignUpCounters({ client: store.client, tables: store.tables, wire: store.wire });
    try {
      return await guardSignUp(event, { counters, caps: capsFromEnv(), now: () => new Date() });
    } catch (error) {
      const limit = (error as { limit?: string }).limit;
      if (limit) logger.warn('sign-up refused', { limit });
      throw error;
    }
  });
