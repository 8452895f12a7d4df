/**
 * The balance watch's outbox run (watch.ts): each e-mail claimed (a lease), sent through SES and
 * deleted once SES took it, or dead-lettered (out of the outbox, never sent again, counted) once SES
 * refused it for good or MAX_SEND_ATTEMPTS runs failed to send it: one bad address never fails every
 * run after it.
 */
import type { WatchStore } from '../core/watch.js';
import { logger } from '../shared/observability.js';

export interface Mailer {
  /**
   * Sends one e-mail; resolves with SES's message id once SES accepted it; rejects with an error whose
   * `permanent` is true when SES will never take that message.
   */
  send(message: { from: string; to: string; subject: string; text: string }): Promise<string>;
  /** Whether `send`'s error refuses this message for good (sending it again fails the same way). */
  permanent?(error: unknown): boolean;
}

/** What sending the outbox needs of the watch's dependencies. */
interface OutboxDeps {
  watches: Pick<WatchStore, 'pendingMessages' | 'claimMessage' | 'deleteMessage' | 'deadLetter'>;
  mailer: Mailer;
  from: string;
  now: () => Date;
}

/** What it counts of a run. */
type OutboxCounts = { sent: number; deadLettered: number; failures: number };

/** How long a run holds an e-mail it is sending before another may send it (SES answers in seconds). */
const SEND_LEASE_MS = 5 * 60_000;
/**
 * Attempts an e-mail gets when SES fails it for a reason that may pass (throttling, an outage, the
 * role or the identity misconfigured): one per lease. Then it is dead-lettered.
 */
export const MAX_SEND_ATTEMPTS = 12;

export async function sendOutbox(deps: OutboxDeps, run: OutboxCounts): Promise<void> {
  for (const message of await deps.watches.pendingMessages()) {
    const nowMs = deps.now().getTime();
    const attempt = await deps.watches.claimMessage(message.id, nowMs + SEND_LEASE_MS, nowMs);
    if (attempt === undefined) continue;
    try {
      await deps.mailer.send({
        from: deps.from,
        to: message.to,
        subject: message.subject,
        text: message.text,
      });
    } catch (error) {
      const permanent = deps.mailer.permanent?.(error) === true;
      if (!permanent && attempt < MAX_SEND_ATTEMPTS) {
        // Kept: its lease lapses and a later run sends it.
        run.failures += 1;
        logger.error('balance watch: e-mail not sent', { id: message.id, attempt, error });
        continue;
      }
      await deadLetter(deps, run, message.id, permanent, attempt, error);
      continue;
    }
    await deps.watches.deleteMessage(message.id);
    run.sent += 1;
  }
}

/** An e-mail out of the outbox: counted (alarmed), never a failure of the run: later runs are clean. */
async function deadLetter(
  deps: OutboxDeps,
  run: OutboxCounts,
  id: string,
  permanent: boolean,
  attempt: number,
  error: unknown,
): Promise<void> {
  const said = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const reason = permanent ? `refused: ${said}` : `${attempt} attempts failed, the last: ${said}`;
  try {
    if (await deps.watches.deadLetter(id, reason, deps.now().toISOString())) run.deadLettered += 1;
    logger.warn('balance watch: e-mail dead-lettered', { id, attempt, permanent, error });
  } catch (failure) {
    // Still in the outbox: the next run tries again (and dead-letters it then).
    run.failures += 1;
    logger.error('balance watch: e-mail could not be dead-lettered', { id, error: failure });
  }
}
