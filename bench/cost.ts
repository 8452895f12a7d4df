/**
 * The infrastructure cost of one request (issue 15): Lambda duration at a memory size plus its
 * request charge, the DynamoDB units the request consumed, CloudFront's request and transfer
 * charges, and that cost as a share of the request's margin (billed minus upstream cost). All in
 * integer 1e-21 USD units (bigint), from the prices in bench/prices.ts.
 */

import { priceUsage } from '../functions/billing/pricing.js';
import { COST_SCALE, formatDecimal, PRICE_SCALE, parseDecimal } from '../functions/core/money.js';
import { SIMULATOR_PRICES, type TierId } from '../functions/core/tiers.js';
import { GIB, PRICES, units } from './prices.js';

export interface MeasuredRequest {
  /** Wall time of the invocation in ms (billed rounded up to a whole ms). */
  durationMs: number;
  readUnits: number;
  writeUnits: number;
  /** Bytes CloudFront sends to the client (headers and body). */
  bytesOut: number;
  promptTokens: number;
  completionTokens: number;
}

export interface RequestCost {
  lambda: bigint;
  dynamo: bigint;
  cloudFront: bigint;
  infra: bigint;
  margin: bigint;
}

const NANO_TO_COST = 10n ** 12n;
/** DynamoDB reports fractional units only in halves (eventually consistent reads): count in halves. */
const halves = (value: number) => BigInt(Math.round(value * 2));

export function requestCost(request: MeasuredRequest, tier: TierId, memoryMb: number): RequestCost {
  const billedMs = BigInt(Math.ceil(request.durationMs));
  const lambda =
    (units(PRICES.lambdaArmPerGbSecond) * BigInt(memoryMb) * billedMs) / (1024n * 1000n) +
    units(PRICES.lambdaPerRequest);
  const dynamo =
    (halves(request.readUnits) * units(PRICES.dynamoPerReadUnit) +
      halves(request.writeUnits) * units(PRICES.dynamoPerWriteUnit)) /
    2n;
  const cloudFront =
    units(PRICES.cloudFrontPerHttpsRequest) +
    (units(PRICES.cloudFrontPerGbOut) * BigInt(request.bytesOut)) / GIB;
  const prices = SIMULATOR_PRICES[tier];
  const charge = priceUsage(
    { promptTokens: request.promptTokens, completionTokens: request.completionTokens, cachedTokens: 0 },
    {
      prices: {
        input: parseDecimal(prices.input, PRICE_SCALE),
        cachedInput: parseDecimal(prices.cachedInput, PRICE_SCALE),
        output: parseDecimal(prices.output, PRICE_SCALE),
      },
      reportsCost: false,
    },
  );
  return {
    lambda,
    dynamo,
    cloudFront,
    infra: lambda + dynamo + cloudFront,
    margin: charge.billedNano * NANO_TO_COST - charge.upstreamCost,
  };
}

/** USD with 9 decimals (nano-USD resolution), for the table. */
export const usd = (value: bigint): string => {
  const nanoRounded = (value + NANO_TO_COST / 2n) / NANO_TO_COST;
  return `$${formatDecimal(nanoRounded * NANO_TO_COST, COST_SCALE)}`;
};

/** A share in percent with one decimal, from bigints. */
export const percent = (part: bigint, whole: bigint): string => {
  if (whole <= 0n) return 'n/a';
  const tenths = (part * 1000n + whole / 2n) / whole;
  return `${tenths / 10n}.${tenths % 10n}%`;
};
