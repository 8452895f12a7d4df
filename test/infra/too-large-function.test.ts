import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { MAX_REQUEST_BYTES, requestTooLarge } from '../../functions/shared/too-large.js';
import { tooLargeFunctionCode } from '../../lib/infra/too-large-function.js';

/** The CloudFront function's code, run as CloudFront runs it: a `handler(event)` in a bare context. */
function run(headers: Record<string, { value: string }>) {
  const handler = runInNewContext(`${tooLargeFunctionCode()}; handler`) as (event: unknown) => unknown;
  const request = { method: 'POST', uri: '/api/v1/chat/completions', headers };
  return { request, result: handler({ request, context: { requestId: 'cf-req-1' } }) };
}

describe('the oversized-body CloudFront function', () => {
  it('answers a body over 6 MB as the local emulator does: 413, OpenAI shape, request id, CORS', () => {
    const { result } = run({ 'content-length': { value: String(MAX_REQUEST_BYTES + 1) } });
    const local = requestTooLarge('cf-req-1');
    const response = result as {
      statusCode: number;
      headers: Record<string, { value: string }>;
      body: { data: string };
    };
    expect(response.statusCode).toBe(413);
    expect(JSON.parse(response.body.data)).toEqual(JSON.parse(local.body));
    expect(Object.fromEntries(Object.entries(response.headers).map(([k, v]) => [k, v.value]))).toEqual(
      local.headers,
    );
  });

  it.each([
    ['at the limit', { 'content-length': { value: String(MAX_REQUEST_BYTES) } }],
    ['small', { 'content-length': { value: '120' } }],
    ['without a length', {}],
    ['with a length that is not a number', { 'content-length': { value: 'lots' } }],
  ])('passes a request %s through unchanged', (_name, headers) => {
    const { request, result } = run(headers);
    expect(result).toBe(request);
  });
});
