/** How often the balance watch runs, in minutes: the CDK schedule and `npm start`'s timer (pure data). */
export const WATCH_INTERVAL_MINUTES = 1;
