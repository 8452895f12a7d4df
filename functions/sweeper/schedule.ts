/** How often expired holds are swept, in minutes: the CDK schedule and `npm start`'s timer (pure data). */
export const SWEEP_INTERVAL_MINUTES = 1;
