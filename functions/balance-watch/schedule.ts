/** How often the balance watch's scheduled runs come, in minutes: the CDK schedules and `npm start`'s timers (pure data). */
/** The outbox alone: the e-mails the dashboard queued (a key created, auto top-up changed). */
export const WATCH_OUTBOX_INTERVAL_MINUTES = 5;
/** The safety sweep: every watched account, for what the stream missed and the top-ups in flight too long. */
export const WATCH_SWEEP_INTERVAL_MINUTES = 60;
