/**
 * Where a request goes when the slice it drew is dry: what this function instance last saw of the
 * account's slices (the available credit of each, read whole at most once a second), and one strongly
 * consistent read of a slice that had credit then.
 *
 * Why not read every slice on each such request: a nearly empty account hammered by its clients has
 * most of its slices dry, so nearly every request would read all of them, and at a few hundred
 * requests a second those reads pass a slice's read limit (3,000 units a second a partition), so that
 * DynamoDB throttles the requests' own reads of their key and slice too: 503s where the answer is a
 * 402. Here a request that draws a dry slice costs one read of one slice, the instance's view costs
 * half a unit a slice a second (an eventually consistent read), and the view only chooses: the credit
 * a request is admitted on is always what the strongly consistent read of its slice returned.
 */
import type { Item } from './items.js';
import type { Slices } from './slices.js';

/** The available credit of a slice item: its balance minus what it holds. */
const availableOf = (item: Item): bigint =>
  BigInt(item.creditBalance?.N ?? '0') - BigInt(item.heldNano?.N ?? '0');

interface View {
  /** Epoch ms until which it stands. */
  until: number;
  /** The available credit of each slice as last seen; 0 for one the read left out (throttled). */
  available: bigint[];
}

export class SliceCredit {
  /** How long a view of an account's slices stands before a request that needs it reads them again. */
  static readonly VIEW_FOR_MS = 1_000;
  /** How many slices one request tries after the one it drew. */
  static readonly TRIES = 2;
  private static readonly CACHE_LIMIT = 10_000;
  private readonly views = new Map<string, View>();

  constructor(private readonly slices: Slices) {}

  /**
   * A slice other than `drawn` that has available credit now, with its item as read strongly just
   * now; undefined when the view shows none (the account is dry, as far as this instance has seen
   * within the second) or the ones it shows had none left. Slices are tried at random among those the
   * view shows with credit, so that the instances of a busy account do not all move to the richest.
   */
  async elsewhere(
    accountId: string,
    slices: number,
    drawn: number,
  ): Promise<{ slice: number; item: Item } | undefined> {
    const view = await this.view(accountId, slices);
    view.available[drawn] = 0n;
    for (let tried = 0; tried < SliceCredit.TRIES; tried++) {
      const candidates: number[] = [];
      view.available.forEach((available, slice) => {
        if (available > 0n) candidates.push(slice);
      });
      const slice = candidates[Math.floor(Math.random() * candidates.length)];
      if (slice === undefined) return undefined;
      const item = await this.slices.readOne(accountId, slice);
      const available = item ? availableOf(item) : 0n;
      view.available[slice] = available;
      if (item && available > 0n) return { slice, item };
    }
    return undefined;
  }

  private async view(accountId: string, slices: number): Promise<View> {
    const now = Date.now();
    const kept = this.views.get(accountId);
    if (kept && now < kept.until && kept.available.length === slices) return kept;
    const items = await this.slices.readForAdmission(accountId, slices);
    const view: View = {
      until: now + SliceCredit.VIEW_FOR_MS,
      available: Array.from({ length: slices }, (_, slice) => {
        const item = items[slice];
        return item ? availableOf(item) : 0n;
      }),
    };
    if (this.views.size >= SliceCredit.CACHE_LIMIT) this.views.clear();
    this.views.set(accountId, view);
    return view;
  }
}
