/**
 * AWS Signature Version 4 for the request path's DynamoDB calls (wire.ts): a JSON POST to one
 * endpoint, its headers fixed but for the operation, the time and the credentials. It signs exactly
 * as @smithy/signature-v4 (the SDK's signer) signs such a request, the same headers and the same
 * `Authorization` (test/unit/adapters/dynamodb-sigv4.property.test.ts compares the two over random
 * credentials, regions, endpoints, paths, bodies and times), synchronously and without the signer's
 * general machinery: its header canonicalisation for any request, a provider call and several promise
 * hops for the region and the credentials, and an HMAC per call to key its signing-key cache.
 * `npx tsx bench/sigv4.ts` (Node 22, a BatchGetItem body and a session token as Lambda's) measures
 * the two signers side by side.
 *
 * The signing key is derived once a day (and when the credentials change): HMAC-SHA256 of the date,
 * region, service and `aws4_request` under `AWS4` + the secret key. Each call then hashes the body
 * and the canonical request (SHA-256) and signs the string to sign (one HMAC). The two hashes are
 * node:crypto's one-shot `hash`, not a `createHash` object each: `npx tsx bench/sigv4.ts`, this file
 * before and after in turn, three runs each, 75, 79 and 83 against 53, 62 and 78 us per signature
 * 5 ms apart (medians).
 */
import { createHmac, hash } from 'node:crypto';

export interface SigningCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
}

/** Where the calls go: the `host` header's value (with its port when it has one) and the path. */
export interface SigningEndpoint {
  host: string;
  path: string;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';
const CONTENT_TYPE = 'application/x-amz-json-1.0';

interface DayKey {
  shortDate: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string | undefined;
  /** The token's line of the canonical request, or nothing without a token. */
  tokenLine: string;
  scope: string;
  key: Buffer;
}

export class DynamoSigner {
  readonly #region: string;
  readonly #service: string;
  readonly #host: string;
  readonly #canonicalPath: string;
  #dayKey: DayKey | undefined;

  constructor(region: string, service: string, endpoint: SigningEndpoint) {
    this.#region = region;
    this.#service = service;
    this.#host = canonicalValue(endpoint.host);
    this.#canonicalPath = canonicalPath(endpoint.path);
  }

  /**
   * The headers of a signed POST of `body` for `target` (`DynamoDB_20120810.GetItem`...): host,
   * content type and target, then `x-amz-date`, the session token (when there is one),
   * `x-amz-content-sha256` and `authorization`, as the SDK's signer adds them.
   */
  sign(target: string, body: string, credentials: SigningCredentials, date: Date): Record<string, string> {
    if (typeof credentials?.accessKeyId !== 'string' || typeof credentials.secretAccessKey !== 'string')
      throw new Error('Resolved credential object is not valid');
    const iso = date.toISOString();
    // 2026-11-26T00:30:05.123Z -> 20261126T003005Z
    const longDate = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
    const day = this.#keyFor(longDate.slice(0, 8), credentials);
    const payloadHash = hash('sha256', body);
    const token = day.sessionToken;
    const signedHeaders = token
      ? 'content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token;x-amz-target'
      : 'content-type;host;x-amz-content-sha256;x-amz-date;x-amz-target';
    const canonicalRequest =
      `POST\n${this.#canonicalPath}\n\n` +
      `content-type:${CONTENT_TYPE}\nhost:${this.#host}\nx-amz-content-sha256:${payloadHash}\n` +
      `x-amz-date:${longDate}\n${day.tokenLine}` +
      `x-amz-target:${canonicalValue(target)}\n\n${signedHeaders}\n${payloadHash}`;
    const stringToSign = `${ALGORITHM}\n${longDate}\n${day.scope}\n${hash('sha256', canonicalRequest)}`;
    const signature = createHmac('sha256', day.key).update(stringToSign).digest('hex');
    const headers: Record<string, string> = {
      host: this.#host,
      'content-type': CONTENT_TYPE,
      'x-amz-target': target,
      'x-amz-date': longDate,
    };
    if (token) headers['x-amz-security-token'] = token;
    headers['x-amz-content-sha256'] = payloadHash;
    headers.authorization = `${ALGORITHM} Credential=${credentials.accessKeyId}/${day.scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
    return headers;
  }

  #keyFor(shortDate: string, credentials: SigningCredentials): DayKey {
    const cached = this.#dayKey;
    if (
      cached?.shortDate === shortDate &&
      cached.accessKeyId === credentials.accessKeyId &&
      cached.secretAccessKey === credentials.secretAccessKey &&
      cached.sessionToken === credentials.sessionToken
    )
      return cached;
    let key = createHmac('sha256', `AWS4${credentials.secretAccessKey}`).update(shortDate).digest();
    for (const part of [this.#region, this.#service, 'aws4_request'])
      key = createHmac('sha256', key).update(part).digest();
    this.#dayKey = {
      shortDate,
      accessKeyId: credentials.accessKeyId,
      secretAccessKey: credentials.secretAccessKey,
      sessionToken: credentials.sessionToken,
      tokenLine: credentials.sessionToken
        ? `x-amz-security-token:${canonicalValue(credentials.sessionToken)}\n`
        : '',
      scope: `${shortDate}/${this.#region}/${this.#service}/aws4_request`,
      key,
    };
    return this.#dayKey;
  }
}

/** A header's value as SigV4 signs it: line breaks as spaces, runs of spaces and tabs as one, no space at either end. */
function canonicalValue(value: string): string {
  return value
    .replace(/[\r\n]/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .replace(/^ | $/g, '');
}

/** The path as SigV4 signs it for services other than S3: dot segments resolved, empty ones dropped, then URI-encoded twice. */
function canonicalPath(path: string): string {
  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const normalised = `${path.startsWith('/') ? '/' : ''}${segments.join('/')}${segments.length > 0 && path.endsWith('/') ? '/' : ''}`;
  return escapeUri(normalised).replace(/%2F/g, '/');
}

/** RFC 3986 encoding: encodeURIComponent, and !'()* as well. */
function escapeUri(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
