/**
 * DynamoDB's JSON protocol spoken directly, for the one read every request makes before its upstream
 * call: the same signer (@smithy/signature-v4), credentials, region, endpoint and clock offset as the
 * function's SDK client, without the client's middleware stack. `npx tsx bench/dynamodb-read.ts`
 * measures both side by side (818 against 283 us of CPU a call on Node 22). At small memory sizes
 * Lambda gives a function a small CPU share, and the CPU spent before the upstream call is added to
 * the time to first token. Everything else (writes, cold reads, admin) stays on the SDK client.
 *
 * Same bounds as the client (client.ts): `connectTimeoutMs` to connect, `requestTimeoutMs` of socket
 * silence, at most `maxAttempts` attempts; like the SDK's standard retry mode it retries network
 * failures, 5xx and throttling with full-jitter backoff, and nothing else.
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SignatureV4 } from '@smithy/signature-v4';
import type { DynamoTimeouts } from './timeouts.js';

const API_VERSION = 'DynamoDB_20120810';
const CONTENT_TYPE = 'application/x-amz-json-1.0';
/** DynamoDB's throttling error codes (besides any 5xx), retried as the SDK retries them. */
const THROTTLING = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'RequestThrottledException',
  'LimitExceededException',
]);
/** Full-jitter backoff: a random wait of up to 50 ms, then up to 100 ms (as the settlement's retries, store.ts). */
const BACKOFF_BASE_MS = 25;

/** A failed call: `name` is DynamoDB's error code (or the network failure's), as the SDK names them. */
export class DynamoWireError extends Error {
  constructor(
    name: string,
    message: string,
    readonly statusCode: number | undefined,
    readonly retryable: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = name;
  }
}

interface Endpoint {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number | undefined;
  path: string;
}

type Operation = 'BatchGetItem';

export class DynamoWire {
  private readonly signer: SignatureV4;
  private endpoint: Promise<Endpoint> | undefined;
  private readonly agents = {
    'http:': new HttpAgent({ keepAlive: true, maxSockets: 64 }),
    'https:': new HttpsAgent({ keepAlive: true, maxSockets: 64 }),
  };

  constructor(
    private readonly client: DynamoDBClient,
    private readonly timeouts: DynamoTimeouts,
  ) {
    const config = client.config;
    this.signer = new SignatureV4({
      service: 'dynamodb',
      region: config.region,
      credentials: config.credentials,
      sha256: config.sha256,
    });
  }

  /** One operation's JSON output; retried within the bounds above, else a DynamoWireError. */
  async call<Output>(operation: Operation, input: object): Promise<Output> {
    const body = JSON.stringify(input);
    for (let attempt = 1; ; attempt++) {
      try {
        return parseAnswer<Output>(await this.send(operation, body));
      } catch (error) {
        const retryable = error instanceof DynamoWireError && error.retryable;
        if (!retryable || attempt >= this.timeouts.maxAttempts) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * BACKOFF_BASE_MS * 2 ** attempt));
      }
    }
  }

  private resolveEndpoint(): Promise<Endpoint> {
    this.endpoint ??= (async () => {
      const config = this.client.config;
      if (config.isCustomEndpoint && config.endpoint) {
        const custom = await config.endpoint();
        return {
          protocol: custom.protocol === 'https:' ? 'https:' : 'http:',
          hostname: custom.hostname,
          port: custom.port,
          path: custom.path || '/',
        };
      }
      const { url } = config.endpointProvider({
        Region: await config.region(),
        UseFIPS: await config.useFipsEndpoint(),
        UseDualStack: await config.useDualstackEndpoint(),
      });
      return {
        protocol: url.protocol === 'http:' ? 'http:' : 'https:',
        hostname: url.hostname,
        port: url.port ? Number(url.port) : undefined,
        path: url.pathname || '/',
      };
    })();
    // A failed resolution is not kept: the next call resolves again.
    this.endpoint.catch(() => {
      this.endpoint = undefined;
    });
    return this.endpoint;
  }

  private async send(operation: Operation, body: string): Promise<string> {
    const endpoint = await this.resolveEndpoint();
    const signed = await this.signer.sign(
      {
        method: 'POST',
        protocol: endpoint.protocol,
        hostname: endpoint.hostname,
        ...(endpoint.port ? { port: endpoint.port } : {}),
        path: endpoint.path,
        query: {},
        headers: {
          host: endpoint.port ? `${endpoint.hostname}:${endpoint.port}` : endpoint.hostname,
          'content-type': CONTENT_TYPE,
          'x-amz-target': `${API_VERSION}.${operation}`,
        },
        body,
      },
      // The SDK client corrects its clock from DynamoDB's answers; its offset applies here too.
      { signingDate: new Date(Date.now() + (this.client.config.systemClockOffset ?? 0)) },
    );
    return new Promise((resolve, reject) => {
      const fail = (error: DynamoWireError) => {
        request.destroy();
        reject(error);
      };
      const request = (endpoint.protocol === 'https:' ? httpsRequest : httpRequest)(
        {
          agent: this.agents[endpoint.protocol],
          protocol: endpoint.protocol,
          hostname: endpoint.hostname,
          port: endpoint.port,
          path: endpoint.path,
          method: 'POST',
          headers: { ...signed.headers, 'content-length': String(Buffer.byteLength(body)) },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', (error) => fail(networkError(error)));
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = response.statusCode ?? 0;
            if (status === 200) resolve(text);
            else fail(answerError(status, text));
          });
        },
      );
      // A socket that does not connect in time, or goes silent, is a retryable failure (client.ts).
      const connectTimer = setTimeout(
        () => fail(new DynamoWireError('TimeoutError', 'connection timed out', undefined, true)),
        this.timeouts.connectTimeoutMs,
      );
      request.on('socket', (socket) => {
        if (!socket.connecting) clearTimeout(connectTimer);
        else socket.once('connect', () => clearTimeout(connectTimer));
      });
      request.setTimeout(this.timeouts.requestTimeoutMs, () =>
        fail(new DynamoWireError('TimeoutError', 'no answer in time', undefined, true)),
      );
      request.on('close', () => clearTimeout(connectTimer));
      request.on('error', (error) => fail(networkError(error)));
      request.end(body);
    });
  }
}

/** A 200's body: DynamoDB's JSON, or a named, non-retried failure (a proxy's page is not an answer). */
function parseAnswer<Output>(text: string): Output {
  try {
    return JSON.parse(text) as Output;
  } catch (error) {
    throw new DynamoWireError('InvalidResponse', `not JSON: ${text.slice(0, 100)}`, 200, false, {
      cause: error,
    });
  }
}

function networkError(error: Error): DynamoWireError {
  if (error instanceof DynamoWireError) return error;
  return new DynamoWireError('NetworkingError', error.message, undefined, true, { cause: error });
}

/** DynamoDB's error answer: `{"__type": "com.amazonaws.dynamodb.v20120810#Code", "message": "..."}`. */
function answerError(status: number, text: string): DynamoWireError {
  let code = `HTTP${status}`;
  let message = text.slice(0, 300);
  try {
    const parsed = JSON.parse(text) as { __type?: unknown; message?: unknown; Message?: unknown };
    if (typeof parsed.__type === 'string') code = parsed.__type.split('#').pop() || code;
    const said = parsed.message ?? parsed.Message;
    if (typeof said === 'string') message = said;
  } catch {
    // Not JSON (a proxy's page): the status and the start of the text say enough.
  }
  return new DynamoWireError(code, message, status, status >= 500 || THROTTLING.has(code));
}
