/**
 * The AWS prices the benchmark's cost table uses (issue 15), in one place, with where they come
 * from. On-demand list prices for US East (N. Virginia), first usage tier, no free tier, as
 * published on the AWS pricing pages named below and quoted in issue 15; read on 2026-11-23.
 * All figures are exact decimal USD strings, turned into integer units (1e-21 USD, money.ts
 * COST_SCALE) before any arithmetic: no floats touch money.
 */
import { COST_SCALE, parseDecimal } from '../functions/core/money.js';

export const PRICES_DATE = '2026-11-23';

export const PRICES = {
  /** aws.amazon.com/lambda/pricing: Arm, first 7.5 billion GB-seconds a month. */
  lambdaArmPerGbSecond: '0.0000133334',
  /** aws.amazon.com/lambda/pricing: requests, both architectures. */
  lambdaPerRequest: '0.0000002', // $0.20 per million
  /** aws.amazon.com/dynamodb/pricing/on-demand: read request unit (a transactional read counts 2). */
  dynamoPerReadUnit: '0.000000125', // $0.125 per million
  /** aws.amazon.com/dynamodb/pricing/on-demand: write request unit (a transactional write counts 2). */
  dynamoPerWriteUnit: '0.000000625', // $0.625 per million
  /** aws.amazon.com/cloudfront/pricing: HTTPS requests, United States and Europe ($0.0100 per 10,000). */
  cloudFrontPerHttpsRequest: '0.000001',
  /** aws.amazon.com/cloudfront/pricing: data transfer out to the internet, US/Europe, first 10 TB ($0.085 per GB). */
  cloudFrontPerGbOut: '0.085',
} as const;

/** A USD price as integer 1e-21 USD units. */
export const units = (usd: string): bigint => parseDecimal(usd, COST_SCALE);

export const GIB = 1024n * 1024n * 1024n;
