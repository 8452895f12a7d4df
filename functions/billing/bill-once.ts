/**
 * A generation's one bill, as a function the generation calls once with what its reply delivered:
 * priced for the reply to carry (bill.ts `price`), then settled (settle.ts `settle`); a second call
 * is refused. It lets go of what it holds once called: a stream keeps it until the relay has
 * delivered, which may be past the collection that ends the invocation (shared/memory.ts), and the
 * billable holds the request, up to 12 MB as a string.
 *
 * A funded client never waits for the ledger: the settlement follows the reply. A held request is the
 * exception: its reply ends only once it is settled, since the settlement is what releases its hold,
 * and a hold can take all of a near-empty account's credit. Replied first, a client that sends its
 * next request as soon as it has this reply would find the credit still held and get a 402 (which
 * tells it not to retry), for a request that was no longer running. It waits one transaction instead,
 * on the slow path only.
 */
import type { RequestPathStore } from '../core/store-request.js';
import { type Bill, type Billable, type Delivered, price } from './bill.js';
import { settle } from './settle.js';

export function billOnce(
  billable: Billable,
  ports: { store: RequestPathStore; afterReply: (work: Promise<void>) => void },
): (delivered: Delivered) => Promise<Bill> {
  let unbilled: { billable: Billable; ports: typeof ports } | undefined = { billable, ports };
  return (delivered) => {
    const once = unbilled;
    unbilled = undefined;
    if (!once) return Promise.reject(new Error('a generation is billed once'));
    return bill(once.billable, delivered, once.ports);
  };
}

async function bill(
  billable: Billable,
  delivered: Delivered,
  ports: { store: RequestPathStore; afterReply: (work: Promise<void>) => void },
): Promise<Bill> {
  const priced = await price(billable, delivered);
  // Only what the settlement needs: `billable` holds the request, and the settlement's write outlasts
  // the collection that ends the invocation.
  const { hold, deadlines } = billable;
  const settling = settle(priced, { hold, deadlines }, ports.store);
  // settle never throws: a failure is deferred or logged with the usage record.
  if (hold) await settling;
  else ports.afterReply(settling.then(() => {}));
  return priced;
}
