/**
 * The payments reconciler: what the webhook missed, found in Stripe and applied through the webhook's
 * own path (functions/payments/events.ts, applyEvent), so a payment is credited, and a refund or a
 * dispute taken back, once by its Stripe id whichever of the two gets there first, in any order, any
 * number of times. Without it a webhook that is down longer than Stripe retries (3 days: a secret not
 * set, a bad deploy, concurrency 0) loses the credit of every payment in that time.
 *
 * What it asks Stripe for: the events of the types the webhook handles that were not delivered
 * (`GET /v1/events?delivery_success=false&types[]=...`: still pending, or every attempt failed),
 * created in a window: from where the last complete pass ended (less an overlap for clocks that
 * disagree), at most 30 days back (what Stripe keeps), to a few minutes ago (the grace: an event that
 * new is the webhook's and Stripe's first retries'). A pass pages through that window newest first
 * (100 events a page, each page applied oldest first); a run stops after MAX_PAGES pages or its time
 * budget and saves its place (the last event applied), and the next run carries on from there: a
 * backlog of any size is worked through, a bounded amount each run. An event that fails to apply
 * keeps the window's end at or before it, so a later pass tries it again.
 *
 * Counted (PaymentsReconciled, functions/payments/metrics.ts) only what moved money or state: a
 * credit, a refund or dispute taken back, an auto top-up switched off; an event the webhook had
 * applied after all (it answered too late, or another endpoint failed it) counts nothing.
 */
import {
  applyEvent,
  HANDLED_EVENT_TYPES,
  type PaymentDeps,
  type PaymentOutcome,
  type StripeEventView,
} from '../payments/events.js';
import { recordPayment } from '../payments/metrics.js';
import { logger } from '../shared/observability.js';

/** What Stripe keeps of its events (its "List all events" reaches back 30 days). */
const RETENTION_MS = 30 * 24 * 3600_000;
/** An event younger than this is left to the webhook and Stripe's first retries. */
const GRACE_MS = 5 * 60_000;
/** A pass starts this long before where the last one ended: Stripe's clock and ours may differ. */
const OVERLAP_MS = 10 * 60_000;
/** Events per list call: Stripe's largest page. */
const PAGE_SIZE = 100;
/** At most this many pages a run (1,000 events), and at most RUN_BUDGET_MS of work. */
const MAX_PAGES = 10;
export const RUN_BUDGET_MS = 60_000;

interface ListedEvent extends StripeEventView {
  /** Unix seconds. */
  created: number;
}

/** Stripe's undelivered events, a page at a time (newest first, as Stripe lists them). */
export interface StripeEventSource {
  listUndelivered(params: {
    types: readonly string[];
    createdGte: number;
    createdLte: number;
    startingAfter: string | undefined;
    limit: number;
  }): Promise<{ events: ListedEvent[]; hasMore: boolean }>;
}

/** Where the reconciler stands between runs (times in unix seconds, as Stripe's `created`). */
export interface Checkpoint {
  /** Every undelivered event created before this was applied by a complete pass. */
  sweptUntil: number;
  /** The pass under way, when the last run stopped before its end. */
  pass?: {
    from: number;
    to: number;
    /** The last event applied: the next page starts after it. */
    cursor?: string;
    /** The oldest `created` of an event that failed to apply in this pass. */
    failedOldest?: number;
  };
}

export interface CheckpointStore {
  load(): Promise<Checkpoint | undefined>;
  save(checkpoint: Checkpoint): Promise<void>;
}

export interface ReconcileDeps {
  payments: PaymentDeps;
  events: StripeEventSource;
  checkpoints: CheckpointStore;
  /** ms since the epoch. */
  nowMs: () => number;
  maxPages?: number;
  /** Events per list call (default PAGE_SIZE, Stripe's largest). */
  pageSize?: number;
  budgetMs?: number;
}

export interface ReconcileRun {
  /** Undelivered events listed and applied through applyEvent. */
  examined: number;
  /** Of those, the ones that moved money or state (PaymentsReconciled). */
  applied: number;
  /** Events that failed to apply (tried again by a later pass). */
  failures: number;
  pages: number;
  /** Whether this run reached the end of its pass (else the next run carries on). */
  passComplete: boolean;
  window: { from: number; to: number };
}

/** Whether applying an event moved money or state (what the webhook had not done). */
export function movedSomething(outcome: PaymentOutcome): boolean {
  switch (outcome.kind) {
    case 'credited':
      return true;
    case 'refunds':
      return outcome.applied.length > 0;
    case 'disputed':
      return outcome.applied;
    case 'auto-top-up-off':
      return outcome.switched;
    default:
      return false;
  }
}

const seconds = (ms: number) => Math.floor(ms / 1000);

export async function reconcile(deps: ReconcileDeps): Promise<ReconcileRun> {
  const started = deps.nowMs();
  const maxPages = deps.maxPages ?? MAX_PAGES;
  const budget = deps.budgetMs ?? RUN_BUDGET_MS;
  const oldest = seconds(started - RETENTION_MS);
  const saved = await deps.checkpoints.load();
  const checkpoint: Checkpoint = saved ?? { sweptUntil: oldest };
  const pass = checkpoint.pass ?? {
    from: Math.max(oldest, checkpoint.sweptUntil - seconds(OVERLAP_MS)),
    to: seconds(started - GRACE_MS),
  };
  // A pass resumed after Stripe stopped keeping its oldest events starts where Stripe's list does.
  pass.from = Math.max(pass.from, oldest);
  const run: ReconcileRun = {
    examined: 0,
    applied: 0,
    failures: 0,
    pages: 0,
    passComplete: false,
    window: { from: pass.from, to: pass.to },
  };
  while (run.pages < maxPages && deps.nowMs() - started < budget) {
    const page = await deps.events.listUndelivered({
      types: HANDLED_EVENT_TYPES,
      createdGte: pass.from,
      createdLte: pass.to,
      startingAfter: pass.cursor,
      limit: deps.pageSize ?? PAGE_SIZE,
    });
    run.pages += 1;
    // Oldest first within the page (the order they happened in; the outcome is the same in any order).
    for (const event of [...page.events].reverse()) {
      run.examined += 1;
      try {
        const outcome = await applyEvent(event, deps.payments);
        if (movedSomething(outcome)) {
          run.applied += 1;
          recordPayment('reconciled', 'stripe event the webhook missed, applied by the reconciler', {
            eventId: event.id,
            eventType: event.type,
            created: event.created,
            outcome,
          });
        }
      } catch (error) {
        run.failures += 1;
        pass.failedOldest = Math.min(pass.failedOldest ?? event.created, event.created);
        logger.error('reconciler: event not applied (a later pass tries again)', {
          eventId: event.id,
          eventType: event.type,
          error,
        });
      }
    }
    const last = page.events.at(-1);
    if (last) pass.cursor = last.id;
    if (!page.hasMore || !last) {
      run.passComplete = true;
      break;
    }
    await deps.checkpoints.save({ sweptUntil: checkpoint.sweptUntil, pass });
  }
  if (run.passComplete) {
    // Up to the window's end, or to the oldest event that failed (kept in the next window).
    const sweptUntil = Math.min(pass.to, pass.failedOldest ?? pass.to);
    await deps.checkpoints.save({ sweptUntil: Math.max(sweptUntil, checkpoint.sweptUntil) });
  } else {
    await deps.checkpoints.save({ sweptUntil: checkpoint.sweptUntil, pass });
  }
  return run;
}
