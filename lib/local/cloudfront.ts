/**
 * What CloudFront and a Function URL do to a request on its way to the function, as the emulator
 * models it (lib/local/emulator.ts), for one origin set up as in lib/infra/edge-routes.ts:
 * - the viewer-request CloudFront Function runs first, on every behaviour, and may answer itself;
 * - CloudFront adds the origin's custom header (`x-origin-verify`) and, behind an origin access
 *   control, signs the origin request with SigV4. AWS, OriginAccessControlConfig (CloudFront API
 *   Reference): "always – CloudFront signs all origin requests, overwriting the Authorization header
 *   from the viewer request if one exists"; "no-override – If the viewer request doesn't contain the
 *   Authorization header, then CloudFront signs the origin request. If the viewer request contains the
 *   Authorization header, then CloudFront doesn't sign the origin request and instead passes along the
 *   Authorization header from the viewer request";
 * - a Function URL with auth type AWS_IAM refuses, 403 before any invocation, a request that is not
 *   SigV4-signed for Lambda (AWS Lambda Developer Guide, "Control access to Lambda function URLs":
 *   Lambda authenticates and authorizes requests with IAM). Locally it is enough to check that the
 *   request carries a SigV4 `Authorization` for the `lambda` service and its `x-amz-date`: the
 *   signature itself is not recomputed, and no IAM policy is evaluated.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { runInNewContext } from 'node:vm';
import { SignatureV4 } from '@smithy/signature-v4';
import type { OriginSetup } from '../infra/edge-routes.js';

/** The origin setup of a URL that is not behind CloudFront's special handling: auth NONE, no OAC. */
export const PLAIN_ORIGIN: OriginSetup = { urlAuthType: 'NONE', originHeader: true };

type SourceData = string | ArrayBuffer | ArrayBufferView;
const bytes = (data: SourceData) =>
  typeof data === 'string'
    ? data
    : ArrayBuffer.isView(data)
      ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
      : new Uint8Array(data);

/** SHA-256 and HMAC-SHA256 over node:crypto, in the shape the SDK's signer takes. */
class Sha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

// The distribution's own credentials: an OAC signs as the CloudFront service principal.
const signer = new SignatureV4({
  service: 'lambda',
  region: 'us-east-1',
  credentials: { accessKeyId: 'ASIACLOUDFRONTLOCAL', secretAccessKey: 'local-cloudfront-signing-key' },
  sha256: Sha256,
});

/**
 * The headers CloudFront adds to (or replaces in) the viewer's request before it reaches the origin:
 * the origin header, and the OAC's signature where its SigningBehavior calls for one.
 */
export async function originRequestHeaders(
  setup: OriginSetup,
  request: { method: string; url: URL; headers: Record<string, string> },
  originVerifyValue: string | undefined,
): Promise<Record<string, string>> {
  const added: Record<string, string> =
    setup.originHeader && originVerifyValue !== undefined ? { 'x-origin-verify': originVerifyValue } : {};
  const sign =
    setup.originAccessControl === 'always' ||
    (setup.originAccessControl === 'no-override' && request.headers.authorization === undefined);
  if (!sign) return added;
  const { authorization: _viewers, ...viewer } = request.headers;
  const signed = await signer.sign({
    method: request.method,
    protocol: 'https:',
    hostname: request.url.hostname,
    path: request.url.pathname,
    query: Object.fromEntries(request.url.searchParams),
    headers: { ...viewer, ...added, host: request.url.host },
  });
  const { host: _host, ...headers } = signed.headers;
  // Every header the signature covers, `authorization` included: the viewer's own is overwritten.
  return headers;
}

const SIGV4_FOR_LAMBDA =
  /^AWS4-HMAC-SHA256 Credential=[^/\s]+\/\d{8}\/[a-z0-9-]+\/lambda\/aws4_request, ?SignedHeaders=[a-z0-9;-]+, ?Signature=[0-9a-f]{64}$/;

/**
 * What a Function URL answers before invoking the function, or undefined when it invokes it: with
 * AWS_IAM, a request without a SigV4 signature for Lambda is refused 403, as Lambda does.
 */
export function functionUrlRefusal(
  setup: OriginSetup,
  headers: Record<string, string>,
): { statusCode: number; headers: Record<string, string>; body: string } | undefined {
  if (setup.urlAuthType === 'NONE') return undefined;
  const signed = SIGV4_FOR_LAMBDA.test(headers.authorization ?? '') && headers['x-amz-date'] !== undefined;
  if (signed) return undefined;
  return {
    statusCode: 403,
    headers: { 'content-type': 'application/json', 'x-amzn-errortype': 'AccessDeniedException' },
    body: JSON.stringify({ Message: 'Forbidden' }),
  };
}

interface CloudFrontFunctionResponse {
  statusCode: number;
  statusDescription?: string;
  headers?: Record<string, { value: string }>;
  body?: string | { encoding: 'text' | 'base64'; data: string };
}

/**
 * A viewer-request CloudFront Function, run as CloudFront runs it: its `handler(event)` in a context
 * of its own (no Node globals), with the event shape of CloudFront Functions (Developer Guide, "Event
 * structure": lower-case header names, each `{ value }`). Returns the function's own answer, or the
 * request headers it lets through.
 */
export function viewerRequestFunction(code: string) {
  const handler = runInNewContext(`${code}; handler`) as (event: unknown) => unknown;
  return (request: { method: string; url: URL; headers: Record<string, string>; requestId: string }) => {
    const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, { value: v }]));
    const result = handler({
      version: '1.0',
      context: { eventType: 'viewer-request', requestId: request.requestId },
      request: {
        method: request.method,
        uri: request.url.pathname,
        querystring: Object.fromEntries([...request.url.searchParams].map(([k, v]) => [k, { value: v }])),
        headers,
        cookies: {},
      },
    }) as CloudFrontFunctionResponse | { headers: Record<string, { value: string }> };
    if ('statusCode' in result) {
      const body = result.body;
      return {
        response: {
          statusCode: result.statusCode,
          headers: Object.fromEntries(Object.entries(result.headers ?? {}).map(([k, v]) => [k, v.value])),
          body:
            body === undefined
              ? ''
              : typeof body === 'string'
                ? body
                : Buffer.from(body.data, body.encoding === 'base64' ? 'base64' : 'utf8'),
        },
      };
    }
    return {
      headers: Object.fromEntries(Object.entries(result.headers).map(([k, v]) => [k, v.value])),
    };
  };
}
