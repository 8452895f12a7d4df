/**
 * The overdraft bound, as a model of one balance slice: what admission (billing/holds.ts needsHold, and
 * a hold's condition: available credit above zero before it), settlement, deferral and hold expiry do
 * to its balance and held amount, and the bound checked after every step. The unit test runs the model
 * alone, many times; the integration test runs the same steps through the real admission and store
 * against DynamoDB Local and holds them equal to the model at every step.
 *
 * The bound: at every moment the balance is at least minus the largest, over the requests admitted so
 * far, of that request's bill plus the bills of the requests that, when it was admitted, were not yet
 * billed and had no live hold (admitted without one, or whose hold had expired). Those are at most
 * maxConcurrency - 1 running requests, plus any whose function ended without billing (a deferred
 * settlement, or a killed function billed later from its log line).
 */
import fc from 'fast-check';
import { needsHold } from '../../functions/billing/holds.js';

export type Step =
  /** A request arrives: read, then admitted on the fast path, held, or refused (402); 429 if maxConcurrency run. */
  | { op: 'admit'; worst: bigint; billPct: number }
  /** A running request's function ends: settles its bill (a hold given back with it), or nothing billed. */
  | { op: 'settle'; pick: number }
  /** A running request's function ends unbilled (its settlement deferred, or it was killed): billed later. */
  | { op: 'defer'; pick: number }
  /** An ended request's hold expires and the sweeper releases it; its bill may still come (from its log line). */
  | { op: 'expire'; pick: number }
  /** An ended request is billed late (the sweeper completes its deferral, or the log line is billed). */
  | { op: 'late'; pick: number };

export interface Scenario {
  maxConcurrency: number;
  credit: bigint;
  steps: Step[];
}

export interface Request {
  index: number;
  worst: bigint;
  bill: bigint;
  held: boolean;
  holdLive: boolean;
  running: boolean;
}

export type Admission = 'fast' | 'held' | 'refused' | 'throttled';

/** The bill a step draws: `billPct` percent of the worst case, rounded down (never above it). */
export const billOf = (worst: bigint, billPct: number) => (worst * BigInt(billPct)) / 100n;

export class SliceModel {
  balance: bigint;
  held = 0n;
  /** Admitted and not yet billed (nor ended with nothing billed). */
  readonly open: Request[] = [];
  /** The restated bound so far: max over admissions of its bill + the unheld unbilled bills then. */
  bound = 0n;
  /** The old claim's bound: the largest bill of any request admitted. */
  largestBill = 0n;
  /** The largest available credit a fast-path request was admitted on (for the bound in credit). */
  largestFastCredit = 0n;
  /** How far below the old claim's bound the balance went, at most (0 while it held). */
  excessOverOldClaim = 0n;
  /** Whether any request ended without billing and was billed later (the bound's extra terms). */
  deferred = false;

  constructor(
    credit: bigint,
    readonly maxConcurrency: number,
  ) {
    this.balance = credit;
  }

  running(): Request[] {
    return this.open.filter((r) => r.running);
  }
  ended(): Request[] {
    return this.open.filter((r) => !r.running);
  }
  endedHolding(): Request[] {
    return this.open.filter((r) => !r.running && r.holdLive);
  }

  /** What admission decides on a read of this slice, as admission.ts and the hold's condition do. */
  decide(worst: bigint): Admission {
    if (this.running().length >= this.maxConcurrency) return 'throttled';
    const read = { balanceNano: this.balance, heldNano: this.held };
    if (!needsHold(read, worst, this.maxConcurrency)) return 'fast';
    return this.balance - this.held > 0n ? 'held' : 'refused';
  }

  admit(index: number, worst: bigint, billPct: number, outcome: Admission): Request | undefined {
    if (outcome === 'throttled' || outcome === 'refused') return undefined;
    const request: Request = {
      index,
      worst,
      bill: billOf(worst, billPct),
      held: outcome === 'held',
      holdLive: outcome === 'held',
      running: true,
    };
    const unheld = this.open.filter((r) => !r.holdLive).reduce((sum, r) => sum + r.bill, 0n);
    if (request.bill + unheld > this.bound) this.bound = request.bill + unheld;
    if (request.bill > this.largestBill) this.largestBill = request.bill;
    if (outcome === 'fast' && this.balance - this.held > this.largestFastCredit)
      this.largestFastCredit = this.balance - this.held;
    if (request.held) this.held += worst;
    this.open.push(request);
    return request;
  }

  /** The request billed now (its hold, if live, released with it); gone from the open requests. */
  bill(request: Request): void {
    this.balance -= request.bill;
    this.drop(request);
  }

  /** A hold given back without a charge: the request's own (nothing billed), or an expired one. */
  release(request: Request, stillOpen: boolean): void {
    this.held -= request.worst;
    request.holdLive = false;
    if (!stillOpen) this.drop(request);
  }

  private drop(request: Request): void {
    if (request.holdLive) this.held -= request.worst;
    request.holdLive = false;
    this.open.splice(this.open.indexOf(request), 1);
  }

  /** After every step: the restated bound holds (and how far past the old one the balance went). */
  check(): void {
    if (this.balance < -this.bound)
      throw new Error(`balance ${this.balance} below minus the restated bound ${this.bound}`);
    // With every bill written by the function that ran it (nothing deferred), the unheld unbilled
    // requests are the ones running: at most maxConcurrency - 1 besides the one admitted, each admitted
    // on at least maxConcurrency x its worst case of available credit.
    if (!this.deferred) {
      const n = BigInt(this.maxConcurrency);
      if (-this.balance > n * this.largestBill)
        throw new Error(`balance ${this.balance} below minus maxConcurrency x the largest bill`);
      if (n * (-this.balance - this.largestBill) > (n - 1n) * this.largestFastCredit)
        throw new Error(`balance ${this.balance} below minus one bill and the fast path's credit`);
    }
    const excess = -this.balance - this.largestBill;
    if (excess > this.excessOverOldClaim) this.excessOverOldClaim = excess;
  }
}

/** The model alone, step by step: what happened to each request, for a test to mirror or inspect. */
export function runModel(scenario: Scenario): SliceModel {
  const model = new SliceModel(scenario.credit, scenario.maxConcurrency);
  for (const [index, step] of scenario.steps.entries()) {
    applyToModel(model, index, step);
    model.check();
  }
  return model;
}

/** One step on the model; returns what it did (the admission outcome, or the request acted on). */
export function applyToModel(
  model: SliceModel,
  index: number,
  step: Step,
): { admission?: Admission; request?: Request; action?: 'bill' | 'release' | 'none' } {
  if (step.op === 'admit') {
    const admission = model.decide(step.worst);
    const request = model.admit(index, step.worst, step.billPct, admission);
    return { admission, ...(request ? { request } : {}) };
  }
  const pool =
    step.op === 'settle' || step.op === 'defer'
      ? model.running()
      : step.op === 'expire'
        ? model.endedHolding()
        : model.ended();
  const request = pool[step.pick % Math.max(1, pool.length)];
  if (!request) return {};
  switch (step.op) {
    case 'settle':
    case 'late': {
      if (request.bill > 0n) {
        model.bill(request);
        return { request, action: 'bill' };
      }
      // Nothing billed: a live hold is given back; a request without one just ends.
      const holding = request.holdLive;
      if (holding) model.release(request, false);
      else model.bill(request);
      return { request, action: holding ? 'release' : 'none' };
    }
    case 'defer':
      request.running = false;
      model.deferred = true;
      return { request, action: 'none' };
    case 'expire':
      model.release(request, true);
      return { request, action: 'release' };
  }
}

/**
 * Scenarios: small numbers, so that worst cases of different sizes (up to the whole credit) meet near
 * the fast path's threshold (maxConcurrency x worst case); bills mostly the whole worst case, else any
 * part of it; requests run long when the draws leave them (settle and defer pick among those running).
 */
export const scenarioArbitrary = (options: { maxLength?: number; withDeferrals?: boolean } = {}) =>
  fc
    .record({ maxConcurrency: fc.integer({ min: 1, max: 4 }), credit: fc.bigInt({ min: 1n, max: 300n }) })
    .chain(({ maxConcurrency, credit }) =>
      fc.record({
        maxConcurrency: fc.constant(maxConcurrency),
        credit: fc.constant(credit),
        steps: fc.array(
          fc.oneof(
            {
              weight: 4,
              arbitrary: fc.record({
                op: fc.constant('admit' as const),
                worst: fc.bigInt({ min: 1n, max: credit }),
                billPct: fc.oneof(fc.constant(100), fc.integer({ min: 0, max: 100 })),
              }),
            },
            { weight: 3, arbitrary: fc.record({ op: fc.constant('settle' as const), pick: fc.nat(7) }) },
            ...(options.withDeferrals === false
              ? []
              : [
                  { weight: 1, arbitrary: fc.record({ op: fc.constant('defer' as const), pick: fc.nat(7) }) },
                  {
                    weight: 1,
                    arbitrary: fc.record({ op: fc.constant('expire' as const), pick: fc.nat(7) }),
                  },
                  { weight: 1, arbitrary: fc.record({ op: fc.constant('late' as const), pick: fc.nat(7) }) },
                ]),
          ),
          { minLength: 3, maxLength: options.maxLength ?? 30 },
        ),
      }),
    ) satisfies fc.Arbitrary<Scenario>;

/** The counterexample to the old claim: at most 2 at once, balance 100; ends at -149, largest bill 100. */
export const OLD_CLAIM_COUNTEREXAMPLE: Scenario = {
  maxConcurrency: 2,
  credit: 100n,
  steps: [
    // A: worst case 50, admitted without a hold (100 >= 2 x 50); it runs long.
    { op: 'admit', worst: 50n, billPct: 100 },
    // B: worst case 99 needs a hold (100 < 2 x 99); 100 available, so held; bills 99.
    { op: 'admit', worst: 99n, billPct: 100 },
    { op: 'settle', pick: 1 },
    // C: worst case 100, held on the 1 left; bills 100.
    { op: 'admit', worst: 100n, billPct: 100 },
    { op: 'settle', pick: 1 },
    // A bills 50.
    { op: 'settle', pick: 0 },
  ],
};
