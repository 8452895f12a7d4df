/** How often expired holds are swept, in minutes: the CDK schedule and `npm start`'s timer (pure data). */
export const SWEEP_INTERVAL_MINUTES = 1;
/** How often the accounts below zero are counted (a scan of the accounts table), in minutes. */
export const BALANCE_CHECK_INTERVAL_MINUTES = 15;
