/**
 * The hold sweeper: run by EventBridge schedules (lib/infra), and by `npm start` on the same schedule.
 * Every run releases expired holds, moves due transfers between slices, and publishes its heartbeat; a run with `{"check": "balances"}`
 * (every 15 minutes) counts the accounts below zero instead.
 */
import middy from '@middy/core';
import { getStore } from '../adapters/dynamodb/index.js';
import { logContext, logger, recordNegativeBalances, recordSweep } from '../shared/observability.js';
import { rollUpActivity, type SweepResult, sweep } from './sweep.js';

type SweeperEvent = { check?: 'balances' } | undefined;

export const handler = middy<SweeperEvent, SweepResult | { negativeBalances: number }>()
  .use(logContext())
  .handler(async (event) => {
    if (event?.check === 'balances') {
      const negativeBalances = await getStore().countNegativeBalances();
      await rollUpActivity(getStore());
      recordNegativeBalances(negativeBalances);
      if (negativeBalances > 0) logger.warn('accounts below zero', { negativeBalances });
      return { negativeBalances };
    }
    const result = await sweep(getStore());
    recordSweep();
    return result;
  });
