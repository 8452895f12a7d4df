import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Principal, refuseCredit } from '../../../functions/core/access.js';
import { InsufficientCreditsError } from '../../../functions/core/errors.js';
import { cors } from '../../../functions/shared/cors.js';
import {
  type FunctionUrlEvent,
  type FunctionUrlResult,
  httpErrorHandler,
} from '../../../functions/shared/http.js';

/**
 * The 402's body is the product's flat one, which an OpenAI SDK surfaces only as `402 "Insufficient
 * credits"`; the balance and the top-up page also go out as headers, which the SDKs expose
 * (`error.headers`) and a browser may read (CORS).
 */
const TOP_UP = 'https://dashboard.example.com/settings/billing';

const handler = middy<FunctionUrlEvent, FunctionUrlResult, Error, Context>()
  .use(cors())
  .use(httpErrorHandler())
  .handler(async () => {
    throw new InsufficientCreditsError('-0.000012', TOP_UP);
  });

let server: ReturnType<typeof createServer>;
let baseURL: string;
beforeAll(async () => {
  server = createServer(async (req, res) => {
    req.resume();
    const event = {
      rawPath: req.url ?? '/',
      headers: {},
      requestContext: { http: { method: req.method } },
    } as unknown as FunctionUrlEvent;
    const result = (await handler(event, { awsRequestId: 'req-1' } as Context)) as FunctionUrlResult;
    res.writeHead(result.statusCode ?? 500, result.headers as Record<string, string>);
    res.end(result.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
});
afterAll(() => server?.close());

describe('the 402', () => {
  it('carries the top-up page and the balance in headers, its body unchanged', async () => {
    const result = (await handler(
      {
        rawPath: '/x',
        headers: {},
        requestContext: { http: { method: 'POST' } },
      } as unknown as FunctionUrlEvent,
      { awsRequestId: 'r' } as Context,
    )) as FunctionUrlResult;
    expect(result.statusCode).toBe(402);
    expect(result.headers).toMatchObject({
      link: `<${TOP_UP}>; rel="payment"`,
      'x-credit-balance': '-0.000012',
    });
    expect(JSON.parse(result.body as string)).toEqual({
      error: 'Insufficient credits',
      balance: -0.000012,
      message: expect.stringContaining(TOP_UP),
      topUpUrl: TOP_UP,
    });
    const exposed = String(result.headers?.['access-control-expose-headers']).split(/,\s*/);
    expect(exposed).toEqual(expect.arrayContaining(['link', 'x-credit-balance']));
  });

  it("is read by the OpenAI SDK's error from its headers", async () => {
    const client = new OpenAI({ apiKey: 'k', baseURL, maxRetries: 0 });
    const error = await client.chat.completions
      .create({ model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(402);
    expect(apiError.headers?.get('x-credit-balance')).toBe('-0.000012');
    expect(apiError.headers?.get('link')).toBe(`<${TOP_UP}>; rel="payment"`);
  });

  it("states the account's balance over all its slices where the read found it, not the slice's", () => {
    // The read drew a slice with 3,050 nano-USD less than nothing; the account's slices come to 81,950 less.
    const principal: Principal = {
      keyId: 'key_1',
      accountId: 'acct',
      keyStatus: 'active',
      accountStatus: 'active',
      balanceNano: -3_050n,
      heldNano: 0n,
      slice: 2,
      accountBalanceNano: -81_950n,
    };
    const refused = refuseCredit(principal, TOP_UP);
    expect(refused.headers['x-credit-balance']).toBe('-0.00008195');
    expect(refused.toBody()).toMatchObject({ balance: -0.00008195 });
    expect(refused.message).toContain('-0.00008195 USD');
    // Where the slice shows nothing to spend but the account's balance is above zero, that balance is
    // held by requests in flight (on the other slices): the 402 says so.
    const held = refuseCredit({ ...principal, balanceNano: 0n, accountBalanceNano: 40_000n }, TOP_UP);
    expect(held.headers['x-credit-balance']).toBe('0.00004');
    expect(held.message).toContain('held by requests in flight');
    // An account kept in one item: its balance is the whole.
    const { accountBalanceNano: _, slice: __, ...whole } = principal;
    expect(refuseCredit(whole, TOP_UP).headers['x-credit-balance']).toBe('-0.00000305');
  });
});
