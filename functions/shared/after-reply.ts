/**
 * Work an invocation does after its reply has gone out: a completion's settlement. The client never
 * waits for the ledger, yet the work is awaited before the handler returns, as Lambda requires (its
 * Node 24 runtime no longer waits for pending promises, and a frozen environment would leave a
 * generation unbilled). A middy plugin: `requestStart` gives each invocation's context an
 * `afterReply`, `requestEnd` (which middy awaits once the response stream has ended) waits for it all.
 */
import type { Context } from 'aws-lambda';

export interface AfterReplyContext extends Context {
  /** Runs `work` now; the invocation ends only once it has settled. It must not reject. */
  afterReply(work: Promise<void>): void;
}

const PENDING = Symbol('afterReply pending work');
type WithPending = Context & { [PENDING]?: Promise<void>[]; afterReply?: (work: Promise<void>) => void };

export function afterReplyPlugin(): {
  requestStart: () => void;
  requestEnd: (request: unknown) => Promise<void>;
} {
  return {
    requestStart: ((request: { context: WithPending }) => {
      const pending: Promise<void>[] = [];
      request.context[PENDING] = pending;
      request.context.afterReply = (work) => {
        pending.push(work);
      };
    }) as () => void,
    requestEnd: async (request) => {
      const context = (request as { context: WithPending }).context;
      await Promise.allSettled(context[PENDING] ?? []);
    },
  };
}
